"""The RocketMQ remoting front: RocketMQ's own clients and `mqadmin` against mqstore.

One TCP listener answers name-server and broker request codes alike (a server that is both,
as the remoting spec's §5.3 describes); it runs inside the pull-notifier process, beside its
HTTP API, and forwards sends to the writer (see docs/remoting.md).
"""
