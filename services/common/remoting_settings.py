"""The `remoting` section of the config file: the RocketMQ protocol front (services/remoting).

    remoting:
      port: 9876                        # name-server and broker codes on one port
      writer_address: 127.0.0.1:8085    # the writer's forward listener (writer.forward_port)
      connections_max: 1000
      frame_size_bytes_max: 16777216
      held_pulls_max: 1000

The front runs inside the pull-notifier process.  The address clients are given in routes
is `store.store_host`: the STOREHOST of every record and of every offset msg id, which
`mqadmin queryMsgById` connects to, so it must be this front's reachable address.
"""

from __future__ import annotations

import dataclasses

from mqstore.storage import ConfigError

MIB = 1 << 20


@dataclasses.dataclass(frozen=True, kw_only=True)
class RemotingSettings:
    """Where the front listens and every bound it keeps."""

    enabled: bool = True
    """Serve the remoting protocol beside the notifier's HTTP API."""

    host: str = "127.0.0.1"
    """Listen address.  Loopback unless told otherwise (`mqstore up --host`, or 0.0.0.0 in
    the operator's config file, where clients come from outside the pod)."""

    port: int = 9876
    """RocketMQ's name-server port: `setNamesrvAddr("host:9876")` works unchanged, and the
    route sends broker traffic to `store.store_host` (the same port under `mqstore up`)."""

    cluster_name: str = "DefaultCluster"
    """The cluster routes and `clusterList` name (RocketMQ's default)."""

    broker_name: str = "mqstore"
    """The one broker's name in routes, message queues and `brokerStatus`."""

    connections_max: int = 1000
    """Client connections at once; one more is closed at accept.  Each costs a socket and a
    reader task; 1,000 stays under the common 1,024 open-files soft limit."""

    frame_size_bytes_max: int = 16 * MIB
    """Largest frame read (RocketMQ's `frameMaxLength`, 16 MiB); a longer one closes the
    connection, as a RocketMQ server does, since the next frame cannot be found."""

    requests_in_flight_per_connection_max: int = 1024
    """Requests of one connection served at once (held pulls included); past it the reader
    waits before reading the next frame (TCP back-pressure, nothing refused)."""

    held_pulls_max: int = 1000
    """Pulls held by long polling at once; one more that would wait answers SYSTEM_BUSY
    (the client pulls again after its 1 s error delay, instead of at once).  Each holds a
    future and a request."""

    held_pulls_per_client_max: int = 100
    """Pulls one client host held at once; one more that would wait answers SYSTEM_BUSY.
    A tenth of `held_pulls_max`: one client cannot hold every slot, and a consumer holds one
    pull per queue it is assigned (100 queues)."""

    pull_suspend_ms_max: int = 20_000
    """Longest hold of a pull, whatever `suspendTimeoutMillis` asks: clients wait 30 s for
    the answer (push 15 s, lite pull 20 s holds), and an answer after that closes the socket."""

    writer_address: str = "127.0.0.1:8085"
    """The writer's forward listener (`writer.forward_port`); in a pod, localhost."""

    writer_requests_in_flight_max: int = 4096
    """Sends forwarded and not yet answered; one more answers SYSTEM_BUSY (5.x producers
    retry it on another broker).  The writer's own bound (put_requests_in_flight_max) is the
    same 4,096."""

    writer_timeout_ms: int = 3_000
    """A forwarded send unanswered this long answers SYSTEM_ERROR and the connection to the
    writer is reopened (the client's own send timeout is 3 s)."""

    topic_auto_create_enabled: bool = True
    """A send naming an unknown topic with `defaultTopic=TBW102` creates it (RocketMQ's
    `autoCreateTopicEnable`); off, such a send answers TOPIC_NOT_EXIST."""

    topics_max: int = 10_000
    """Topics the front's table holds (each is a directory per queue on the volume)."""

    consumer_expiry_ms: int = 120_000
    """A client not heard from (heartbeat, pull) this long leaves its groups (RocketMQ's
    `CHANNEL_EXPIRED_TIMEOUT`, 4 missed 30 s heartbeats)."""

    clients_max: int = 10_000
    """Clients in the consumer and producer tables; a heartbeat from one more is refused."""

    lock_expiry_ms: int = 60_000
    """An orderly consumer's queue lock lasts this long unless renewed (every 20 s)."""

    offsets_flush_interval_ms: int = 1_000
    """Offsets committed by remoting clients are kept in memory and written to the group
    files (`config/consumer-offsets/`) this often and at stop: a commit arrives per queue
    every 5 s, and one fsync per commit would cost more than the commits.  A crash loses at
    most this much progress (those messages come again: at least once)."""

    idle_timeout_ms: int = 120_000
    """A connection silent this long is closed (RocketMQ's `serverChannelMaxIdleTimeSeconds`;
    clients heartbeat every 30 s)."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port={self.port} must be in 0..65535")
        for name in ("connections_max", "frame_size_bytes_max", "held_pulls_max",
                     "held_pulls_per_client_max",
                     "requests_in_flight_per_connection_max", "pull_suspend_ms_max",
                     "writer_requests_in_flight_max", "writer_timeout_ms", "topics_max",
                     "consumer_expiry_ms", "clients_max", "lock_expiry_ms",
                     "offsets_flush_interval_ms", "idle_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be positive")
        if self.frame_size_bytes_max < 64 * 1024:
            raise ConfigError(f"frame_size_bytes_max={self.frame_size_bytes_max} must be at "
                              f"least 65536 (a heartbeat of many subscriptions)")
        host, _, port = self.writer_address.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"writer_address={self.writer_address!r} must be host:port")
        for name in ("cluster_name", "broker_name"):
            if not getattr(self, name):
                raise ConfigError(f"{name} must not be empty")
