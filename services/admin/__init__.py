"""`mqstore admin`: administer a running deployment over the services' HTTP APIs, as
RocketMQ's operators do with mqadmin.

    client.py     one signed, unretried HTTP call per request; errors as one line
    endpoints.py  where the services are: --url/--writer-url/--indexer-url or --config
    output.py     tables by default, JSON with --output json
    lag.py        a group's lag on a topic (pure; the operator's drain uses it too)
    topics.py     topics: list, describe, create, delete
    groups.py     groups: list, describe (committed offsets and lag), reset
    messages.py   messages by key, by msg id, by queue offset
    retries.py    retry and dead letter topics per group, delayed messages per level
    status.py     broker status: readiness, replication, dispatch
    parser.py     the argparse tree and the one handler `mqstore admin` runs

Every command is one or a few HTTP calls, each named in docs/admin.md; nothing here opens
the store's files, so the commands work on any deployment the services' URLs reach.
"""
