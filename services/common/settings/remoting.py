"""The `remoting` section of the config file: the RocketMQ protocol front
(services/notifier/remoting).

    remoting:
      port: 9876                        # name-server and broker codes on one port
      writer_address: 127.0.0.1:8085    # the writer's forward listener (writer.forward_port)
      connections_max: 1000
      frame_size_bytes_max: 16777216
      held_pulls_max: 1000
      namesrv_addresses: namesrv:9876   # register with these name servers ("a:9876;b:9876")
      register_interval_ms: 30000

The front runs inside the pull-notifier process.  Two addresses name it to clients:

    remoting.advertised_address  host:port, a DNS name allowed: the broker address of
                                 routes (brokerAddrs) and cluster info (mqadmin clusterList)
    store.store_host             ip:port (records store it as binary IPv4/IPv6 and a port):
                                 STOREHOST of every record, offset msg ids (mqadmin
                                 queryMsgById), a check-back's record, a reply's storeHost

An empty `advertised_address` (the default, as under `mqstore up`) means `store.store_host`.
On Kubernetes each pod sets both from the downward API (operator/addresses.py): its stable
DNS name through the headless Service, and its pod IP.
"""

from __future__ import annotations

import dataclasses

from mqstore.storage import ConfigError

from .host_port import is_host_port, split_addresses
from .remoting_external import check_external, external_address

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
    route sends broker traffic to `advertised_address` (the same port under `mqstore up`)."""

    advertised_address: str = ""
    """The broker address routes and cluster info give clients ("host:port"; a DNS name is
    allowed, unlike `store.store_host`, which records store as binary).  Empty:
    `store.store_host`.  It must reach this front: RocketMQ's clients connect to it for
    every send, pull and heartbeat after asking for a route."""

    external_enabled: bool = False
    """A second listener, on `external_port`, for clients outside the cluster network (a
    NodePort or load balancer in front of it).  The same requests, bounds, TLS and users
    file as `port`; the routes and cluster info it answers name `external_advertised_address`
    as this broker, so a client that came in from outside is sent back the way it came."""

    external_port: int = 9877
    """The external listener's port (0: any free port)."""

    external_advertised_address: str = ""
    """"host:port" that reaches `external_port` from outside: the node's address and the
    NodePort, or the load balancer's.  Required with `external_enabled`."""

    external_advertised_port_plus_broker_id: bool = False
    """Advertise the port of `external_advertised_address` plus `broker_id`: one config
    file for a group's pods, each behind its own NodePort (the operator numbers them so)."""

    external_advertised_addresses: str = ""
    """"host:port" per broker id, separated by ';' (entry `broker_id` is this broker's):
    one config file for a group's pods, each behind its own load balancer (the operator
    writes their addresses).  Empty: `external_advertised_address` (with the option above)."""

    cluster_name: str = "DefaultCluster"
    """The cluster routes and `clusterList` name (RocketMQ's default)."""

    broker_name: str = "mqstore"
    """The one broker's name in routes, message queues and `brokerStatus`."""

    broker_id: int = 0
    """The broker id registered with name servers (`namesrv_addresses`): 0, a master, the
    only id producers send to.  A follower's front that registers too sets 1 or more, so
    the name servers add it to the group beside the master instead of replacing it."""

    namesrv_addresses: str = ""
    """Name servers to register with, as RocketMQ's `namesrvAddr`: "host:port;host:port"
    (DNS names allowed).  Empty (the default, as under `mqstore up`): register nowhere; the
    front answers name-server requests for itself either way.  Each name is resolved again
    at each registration round and every address it resolves to is registered with (a
    headless Service's pods), so adding name servers restarts no broker
    (services/notifier/remoting/registrar.py)."""

    namesrv_tls_enabled: bool = False
    """Connect to the `namesrv_addresses` over TLS (name servers run with `--tls-cert-file`),
    for registrations and the cluster-topics copy alike.  Each name server's certificate is
    verified against the `tls` section's `ca_file` and must name the host as written in
    `namesrv_addresses` (a loopback address: the chain only).  Needs the `tls` section
    (a ConfigError at start without it).  Off: plain TCP, as RocketMQ's broker."""

    cluster_topics_copy_enabled: bool = True
    """A broker with no topic of its own (a new group) that registers with a name server
    takes the cluster's topics from it, so adding a group to a cluster serves every topic
    (services/notifier/remoting/cluster_topics.py).  Off: topics are created by hand, as
    on RocketMQ (`mqadmin updateTopic -c`)."""

    ha_server_address: str = ""
    """`haServerAddr` of each registration: where RocketMQ's own followers would replicate
    from.  mqstore's followers find their master through `replication.master`, not through
    a name server, so it stays empty unless a tool reads it."""

    register_interval_ms: int = 30_000
    """Every this long the front registers with each name server again (RocketMQ's
    `registerNameServerPeriod`, 30 s): a name server drops a broker it has not heard from
    in 120 s, four missed rounds."""

    register_timeout_ms: int = 3_000
    """One registration (or unregistration, or one name's DNS resolution) unanswered this
    long is given up, logged and counted; the connection is closed and the next round
    connects again.  At most `register_interval_ms`: a round never overlaps the next.
    RocketMQ waits 24 s, but a name server answers a registration in milliseconds."""

    register_topics_check_interval_ms: int = 1_000
    """How often the front compares its topic table with what it last registered; a
    change (a topic created, deleted, auto-created by a send, a new consumer group's retry
    topic) registers again at once with a new data version, as RocketMQ's broker does after
    `updateTopic`.  Each check reads `config/topics.json` and looks up every topic (about
    1 µs each: 10 ms a second for 10,000 topics)."""

    name_servers_max: int = 16
    """Name-server addresses registered with at once (after DNS resolution); past it the
    rest are left out and a warning names them.  Each is a connection and a task."""

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
    """Pulls one client connection held at once (a RocketMQ client instance uses one per
    broker; clients behind one address, NAT or a proxy, each get their own); one more that
    would wait answers SYSTEM_BUSY.
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
    """Clients in the consumer and producer tables; a heartbeat from one more is refused
    (SYSTEM_BUSY), never one from a client already registered."""

    clients_per_connection_max: int = 16
    """Client ids one connection may register.  A RocketMQ client instance (`ip@instance`)
    heartbeats on its own connection, so one is the norm; 16 leaves room for a gateway.
    With it, a flood on one connection stops at 16 and cannot fill `clients_max`, where a
    legitimate consumer would be refused with it."""

    heartbeat_groups_max: int = 1_000
    """Consumer plus producer groups one heartbeat may name; more is refused (SYSTEM_ERROR)
    and nothing is recorded.  A client instance sends one entry per consumer and producer it
    runs: a handful.  Each group a heartbeat joins or leaves costs a notify round, so this
    bounds one heartbeat's work (1,000 groups: about 10 ms; 20,000 once took 10 s)."""

    notify_debounce_ms: int = 1_000
    """NOTIFY_CONSUMER_IDS_CHANGED goes to a group at most once per this: the first change is
    told at once, later ones in the window are coalesced into one round at its end, told the
    members as they are then.  A told client only wakes its rebalance thread, so two
    notices within a second do no more than one; a group flipping 100 times (a crash-looping
    pod) costs two rounds per second, not one per member per flip."""

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

    frame_read_timeout_ms: int = 10_000
    """From a frame's first byte (a connection's first frame: from accept), the whole frame
    must arrive within this, or the connection is closed: a sender of a byte a second holds
    a connection 10 s, not forever.  A client writes a frame at once and gives up on a send
    after 3 s itself (RocketMQ's `sendMsgTimeout`); 10 s is a 16 MiB frame at 13 Mbit/s.
    At `connections_max`, the connection whose open frame is oldest is closed to admit a
    new one: slow senders cannot lock legitimate clients out."""

    write_buffer_bytes_max: int = 4 * MIB
    """Answer bytes a connection may have waiting for its client to read.  Above it the
    front stops reading that connection's requests and holds each new answer until the
    buffer drains to half, so a client that never reads costs at most this plus one answer
    (16 pulls of 256 KiB, RocketMQ's default pull transfer size), not one per request."""

    write_drain_timeout_ms: int = 30_000
    """A connection whose answers stay above `write_buffer_bytes_max` this long is closed,
    and its buffer dropped.  RocketMQ clients read as answers arrive; one that has read
    nothing for 30 s has passed every timeout of its own (pulls: 30 s)."""

    property_filter_enabled: bool = True
    """RocketMQ's `enablePropertyFilter`: serve SQL92 filters (`MessageSelector.bySql`).
    On here, where RocketMQ defaults to off: an application's clients should work against
    mqstore unchanged, and with it off a consumer using bySql fails to start (its
    CHECK_CLIENT_CONFIG is answered 1), which is RocketMQ's behaviour, kept for who wants
    it.  RocketMQ keeps it off for its cost (its broker may also compute a bloom bitmap per
    message for every SQL92 group); here only the pulls of a SQL92 subscription pay: they
    decode each candidate's properties and evaluate the expression, while tag and `*`
    pulls read as before."""

    sql92_expression_chars_max: int = 4_096
    """Longest SQL92 expression compiled; a longer one is refused as unparsable (23).  A
    filter names a few properties; a long IN list takes a few thousand characters.  A
    compile costs about 4 µs a character (4,096: about 16 ms, once per cache entry)."""

    sql92_cache_entries_max: int = 100
    """Compiled SQL92 expressions kept (RocketMQ's parser keeps 100): one per distinct
    expression in use.  A push consumer's pulls carry no expression, so each one looks the
    heartbeat's up here instead of compiling it again."""

    region_id: str = "DefaultRegion"
    """RocketMQ's `regionId`: stamped on every stored send as `MSG_REGION` and answered to
    producers; message trace records carry it."""

    trace_on: bool = True
    """RocketMQ's `traceOn`: stamped on every stored send as `TRACE_ON`; a client's trace
    hooks skip messages and sends that say false."""

    reply_push_timeout_ms: int = 3_000
    """How long a reply's push to its requester (PUSH_REPLY_MESSAGE_TO_CLIENT) may wait for
    the requester's answer before the responder is answered SYSTEM_ERROR.  RocketMQ waits
    10 s, but its responder gives up on its send after 3 s."""

    reply_store_enabled: bool = True
    """RocketMQ's `storeReplyMessageEnable`: a pushed reply is also stored in
    `<cluster_name>_REPLY_TOPIC`."""

    server_calls_max: int = 1_000
    """Calls to clients (reply pushes) waiting for an answer at once; one more answers its
    responder SYSTEM_ERROR at once."""

    retry_max_times: int = 16
    """A consumer group's `retryMaxTimes`: deliveries after the first before a failed message
    goes to the group's dead letter queue, when the client does not say (RocketMQ's clients
    send their `maxReconsumeTimes`, 16 by default; services/notifier/remoting/retries.py)."""

    transaction_check_interval_ms: int = 30_000
    """RocketMQ 5.5.0's `transactionCheckInterval`: how often the check service walks the
    half messages (services/notifier/remoting/transaction_check.py).  An UNKNOW transaction
    is committed or rolled back at most this long after `transaction_timeout_ms`."""

    transaction_timeout_ms: int = 6_000
    """RocketMQ's `transactionTimeOut`: a half message younger than this (from its born
    time) is not checked yet, so the producer's own END_TRANSACTION has time to arrive;
    also the least age past which an END_TRANSACTION of a half with
    `CHECK_IMMUNITY_TIME_IN_SECONDS` answers 604."""

    transaction_check_max: int = 15
    """RocketMQ's `transactionCheckMax`: a half checked this many times without an answer
    is moved to `TRANS_CHECK_MAX_TIME_TOPIC` and never checked again (15 checks of 30 s:
    7.5 minutes of a producer that cannot decide)."""

    transaction_halves_per_pass_max: int = 2_000
    """Half messages one check pass reads; the next pass goes on from there.  RocketMQ
    bounds a pass by time (60 s) and its check executor's queue (2,000); a count keeps a
    pass's reads, re-puts and pushes bounded whatever the producers do."""

    transaction_ops_per_pass_max: int = 2_000
    """Op messages one check pass reads to learn which halves are done (each names one
    half or, batched, a few).  A pass that reaches it checks no half (it only moves past
    the halves those ops removed): a half is never checked for want of reading its op."""

    transaction_end_wait_ms: int = 3_000
    """How long END_TRANSACTION waits for its half message to be readable (dispatched by
    the indexer) before answering `Find prepared transaction message failed`.  The
    producer sends 37 as soon as its send is answered, which can be before the indexer has
    dispatched the half; the client's own send timeout is 3 s."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port={self.port} must be in 0..65535")
        for name in ("connections_max", "frame_size_bytes_max", "held_pulls_max",
                     "held_pulls_per_client_max",
                     "requests_in_flight_per_connection_max", "pull_suspend_ms_max",
                     "writer_requests_in_flight_max", "writer_timeout_ms", "topics_max",
                     "consumer_expiry_ms", "clients_max", "clients_per_connection_max",
                     "heartbeat_groups_max", "notify_debounce_ms", "lock_expiry_ms",
                     "offsets_flush_interval_ms", "idle_timeout_ms",
                     "frame_read_timeout_ms", "write_buffer_bytes_max",
                     "write_drain_timeout_ms", "retry_max_times", "reply_push_timeout_ms",
                     "server_calls_max", "transaction_check_interval_ms",
                     "transaction_timeout_ms", "transaction_check_max",
                     "transaction_halves_per_pass_max", "transaction_ops_per_pass_max",
                     "transaction_end_wait_ms", "register_interval_ms",
                     "register_timeout_ms", "register_topics_check_interval_ms",
                     "name_servers_max"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be positive")
        for name in ("sql92_expression_chars_max", "sql92_cache_entries_max"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be positive")
        if self.frame_size_bytes_max < 64 * 1024:
            raise ConfigError(f"frame_size_bytes_max={self.frame_size_bytes_max} must be at "
                              f"least 65536 (a heartbeat of many subscriptions)")
        host, _, port = self.writer_address.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"writer_address={self.writer_address!r} must be host:port")
        if self.advertised_address and not is_host_port(self.advertised_address):
            raise ConfigError(f"advertised_address={self.advertised_address!r} must be "
                              f"host:port with a port in 1..65535 (or empty)")
        for name in ("cluster_name", "broker_name"):
            if not getattr(self, name):
                raise ConfigError(f"{name} must not be empty")
        self._check_registration()
        check_external(self)

    def _check_registration(self) -> None:
        if self.broker_id < 0:
            raise ConfigError(f"broker_id={self.broker_id} must be 0 (a master) or more")
        if self.register_timeout_ms > self.register_interval_ms:
            raise ConfigError(f"register_timeout_ms={self.register_timeout_ms} must be at most "
                              f"register_interval_ms={self.register_interval_ms}")
        for address in self.namesrv_address_list:
            if not is_host_port(address):
                raise ConfigError(f"namesrv_addresses: {address!r} must be host:port with a "
                                  f"port in 1..65535 (entries separated by ';')")

    @property
    def external_address(self) -> str:
        """What this broker advertises on its external listener (remoting_external.py)."""
        return external_address(self)

    @property
    def namesrv_address_list(self) -> tuple[str, ...]:
        """`namesrv_addresses` split at ';' (RocketMQ's separator), blanks dropped."""
        return split_addresses(self.namesrv_addresses)
