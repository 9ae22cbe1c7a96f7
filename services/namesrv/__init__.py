"""`mqstore namesrv`: RocketMQ's name server as a process of its own (see docs/namesrv.md).

Brokers (Apache RocketMQ's, or any that speak its remoting protocol) register their topics
with it; clients and `mqadmin` ask it for routes across every broker group of every
cluster.  It speaks the remoting front's frame and header codecs
(services/notifier/remoting/frame.py, headers.py), reused read-only, and keeps no files.

    settings.py       NamesrvSettings: the listener and every bound
    route_table.py    RouteTable: brokers, clusters, queue data per topic; expiry (no I/O)
    registration.py   a REGISTER_BROKER body, JSON or compressed, as topic configs
    kv_config.py      KvConfigTable: the KV config codes' namespaces
    handlers.py       one thin handler per request code
    server.py         NamesrvServer: the listener, its bounds, the expiry scan
    run.py            run_namesrv: the process until SIGTERM

Nothing is imported here: `mqstore`'s parser reads settings.py for its options without
loading the server (and aiohttp, which the process helpers import).
"""
