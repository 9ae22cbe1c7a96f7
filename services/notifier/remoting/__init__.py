"""The RocketMQ remoting front: RocketMQ's own clients and `mqadmin` against mqstore.

One TCP listener answers name-server and broker request codes alike (one server that is
both: the routes it gives name the very address clients were given as the name server); it
runs inside the pull-notifier process, beside its HTTP API, and forwards sends to the
writer (see docs/remoting.md).
"""
