"""The `writer`, `indexer` and `notifier` sections of the config file (config_file.py): where
each service listens, and the bounds it holds its clients to.  Every field is a setting, read
from the file or `MQSTORE_<SECTION>__<FIELD>`; the docstrings say why each default is what
it is.
"""

from __future__ import annotations

import dataclasses

from mqstore.storage import ConfigError
from mqstore.storage.timer.timer_wheel import SLOTS_TOTAL

MIB = 1 << 20
LOG_LEVELS = ("debug", "info", "warning", "error")
EVENT_LOOPS = ("uvloop", "asyncio")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceSettings:
    """What every service has: where it listens, how long it drains, how much it logs."""

    host: str = "127.0.0.1"
    """Listen address.  Loopback unless told otherwise: a service started by hand answers no
    other machine until its config says so.  In a pod the probes and Prometheus come from
    outside, so the operator's config file sets 0.0.0.0 (operator/config_map.py)."""

    port: int = 0
    """Listen port; 0 lets the OS choose (tests).  The `listening` log line names it."""

    shutdown_timeout_ms: int = 10_000
    """On SIGTERM: how long in-flight requests may run after the listener closed.  Well under
    Kubernetes' 30 s termination grace, which must also cover the store's final flush."""

    log_level: str = "info"
    """One of debug, info, warning, error."""

    event_loop: str = "uvloop"
    """uvloop or asyncio.  With uvloop the writer spent 25–30% less CPU per single-message
    request (93 vs 130 µs async flush, 156 vs 203 µs sync; bench/http_produce.py), and about
    the same per message of 256-message batches (7–8 µs, where the store's put dominates).
    asyncio remains for debugging with the standard loop's tools."""

    header_read_timeout_ms: int = 10_000
    """From a connection's first byte (or a request's first byte after the previous answer)
    until its request line and headers are complete; then 408 and the connection closes.
    A client on a slow link sends a few hundred bytes of headers in well under 1 s; 10 s
    leaves room for a stalled mobile link while a stalled client still lets its socket go."""

    body_read_timeout_ms: int = 30_000
    """The whole request body must arrive within this once the handler reads it; then 408
    and the connection closes, freeing the request's admission slot.  8 MiB (the writer's
    largest body) in 30 s needs 280 KB/s; a client slower than that sends smaller batches."""

    json_depth_max: int = 32
    """Deepest nesting of arrays and objects a JSON body may have; deeper answers 400 before
    it is parsed.  The deepest body the APIs define is 4 levels (a batch's message's
    properties object); Python's parser would fail with RecursionError near 1,000."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port={self.port} must be in 0..65535")
        for name in ("shutdown_timeout_ms", "header_read_timeout_ms", "body_read_timeout_ms",
                     "json_depth_max"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be positive")
        if self.log_level not in LOG_LEVELS:
            raise ConfigError(f"log_level={self.log_level!r} must be one of "
                              f"{', '.join(LOG_LEVELS)}")
        if self.event_loop not in EVENT_LOOPS:
            raise ConfigError(f"event_loop={self.event_loop!r} must be one of "
                              f"{', '.join(EVENT_LOOPS)}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class WriterSettings(ServiceSettings):
    """The commitlog-writer's HTTP bounds (see services/writer)."""

    port: int = 8081

    request_body_size_bytes_max: int = 8 * MIB
    """Largest request body read into memory.  8 MiB carries one 4 MiB body as base64 JSON,
    or a binary batch of 8,000 messages of 1 KiB; larger requests get 413 before any read."""

    batch_messages_max: int = 10_000
    """Messages per batch request.  Bounds the reply: 10,000 JSON results are about 1.5 MB."""

    topic_queue_count: int = 8
    """Queues per topic (RocketMQ `defaultTopicQueueNums`): a message without a queue id goes
    to the next of 0..N-1 round robin, and an explicit queue id must be below N (each queue
    is a directory and a consume queue file, so clients must not create them at will)."""

    retry_after_s: int = 1
    """Retry-After of a 503 (busy store).  HTTP counts in whole seconds; 1 s is the least
    that is not "now", and a pool buffer or the put lock frees well within it."""

    access_log_enabled: bool = False
    """One log line per request.  Off: at 10k requests/s it would cost more than the put."""

    put_requests_in_flight_max: int = 4096
    """Put requests served at once (most wait for a group commit under sync flush); one
    more gets 503 SYSTEM_BUSY with Retry-After before its body is read.  RocketMQ bounds
    the same queue at 10,000 (`sendThreadPoolQueueCapacity`)."""

    put_requests_per_client_max: int = 1024
    """Put requests one client (remote address) may have in flight; one more gets 429
    SYSTEM_BUSY with Retry-After before its body is read.  A quarter of
    `put_requests_in_flight_max`: one client that stalls its requests cannot take every slot
    from the others (over `put_requests_in_flight_max` it is that).  Behind a proxy every
    client shares its address: raise it there."""

    forward_enabled: bool = True
    """Serve the forward listener: the remoting front's sends, RocketMQ-encoded, over one
    persistent connection (services/writer/forward_server.py)."""

    forward_host: str = "127.0.0.1"
    """The forward listener's address.  Loopback: the front runs in the notifier container
    of the same pod (or under `mqstore up` on the same machine).  A peer must prove the
    secret the writer publishes in the data directory (services/common/links/forward_secret.py)
    before a send is taken; loopback keeps even the handshake off the network."""

    forward_port: int = 8085
    """The forward listener's port (0: any free port, named in its log line)."""

    forward_frame_size_bytes_max: int = 16 * MIB
    """Largest forwarded send read: the front's own frame bound (a batch of 4 MiB bodies)."""

    forward_frame_read_timeout_ms: int = 10_000
    """A forward connection's frame (its handshake proof first, counted from accept) must
    arrive whole within this, or the connection is closed: the front writes a frame at once
    and waits `remoting.writer_timeout_ms` (3 s) for its answer, so 10 s only ever closes a
    peer that is not the front."""

    forward_write_buffer_bytes_max: int = 1 * MIB
    """Answer bytes waiting for the front to read; above it the listener stops reading
    requests and holds new answers.  An answer is 17 B + 24 B a message: 1 MiB is ~25,000
    answers, far more than the front's 4,096 sends in flight."""

    forward_write_drain_timeout_ms: int = 10_000
    """A forward connection whose answers stay above `forward_write_buffer_bytes_max` this
    long is closed (the front would have given up on those sends after 3 s)."""

    forward_connections_max: int = 16
    """Forward connections at once.  The front keeps one and opens another after a failure;
    one more is admitted by closing the connection whose handshake or frame has been open
    longest, so unauthenticated connections cannot lock the front out."""

    delay_enabled: bool = True
    """Deliver delay-level messages when they are due (services/writer/delay_schedule.py; a
    master's writer only).  Off, they wait in SCHEDULE_TOPIC_XXXX."""

    delay_pass_interval_ms: int = 100
    """Between two passes of the delay schedule over every level (RocketMQ: 100 ms): how
    late past its due time a delayed message may be put back, at most."""

    delay_deliveries_per_pass_max: int = 2000
    """Delayed messages one pass puts back, over all levels: the schedule's share of the
    writer's loop.  20,000 a second at the default interval."""

    delay_offsets_persist_interval_ms: int = 1000
    """How often the schedule's progress is written (config/delayOffset.json), as far as its
    delivered copies are flushed: what a crash may deliver twice.  RocketMQ: 10 s."""

    timer_enabled: bool = True
    """RocketMQ's `timerWheelEnable`: hold messages asking for a delivery time
    (`TIMER_DELIVER_MS`, `TIMER_DELAY_SEC`, `TIMER_DELAY_MS`) in `rmq_sys_wheel_timer` and
    deliver them when due (services/writer/timer_schedule.py; a master's writer only).  Off,
    they are stored at once, as a 4.x broker stores them."""

    timer_precision_ms: int = 1000
    """RocketMQ's `timerPrecisionMs`: the wheel's slot width.  A due time is floored to it,
    so a message is delivered up to one precision before and after its time.  Part of the
    stored form (slot times are in precision units): config/timercheck records it and the
    writer refuses to start with another."""

    timer_max_delay_s: int = 259_200
    """RocketMQ's `timerMaxDelaySec` (3 days): a later delivery time is refused
    (MESSAGE_ILLEGAL with RocketMQ's remark)."""

    timer_roll_window_slots: int = 172_800
    """RocketMQ's `timerRollWindowSlot` (2 days at 1 s): a message due further ahead is
    parked this far ahead and put back into the timer topic then (`TIMER_ROLL_TIMES`), so
    the wheel's 1,209,600 slots never wrap onto a pending one."""

    timer_log_file_size_bytes: int = 100 * MIB
    """RocketMQ's `mappedFileSizeTimerLog`: one timerlog file, 2,016,000 units of 52 B."""

    timer_flush_interval_ms: int = 1000
    """RocketMQ's `timerFlushIntervalMs`: timerlog, wheel and config/timercheck are synced
    this often, the checkpoint only as far as delivered copies are flushed in the commit
    log.  What a power loss re-enqueues or re-delivers, at most."""

    timer_pass_interval_ms: int = 100
    """Between two passes of the timer schedule when it has nothing due; it also wakes at
    each slot boundary, so a slot is delivered within a few ms of its end."""

    timer_enqueues_per_pass_max: int = 20_000
    """Timer-topic entries one pass moves into the wheel: the enqueue's share of the
    writer's loop (50,000 a second measured by bench/timers.py, so a full pass holds the
    loop ~0.4 s)."""

    timer_deliveries_per_pass_max: int = 5000
    """Due messages one pass puts back: the dequeue's share of the loop per pass."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("request_body_size_bytes_max", "batch_messages_max", "topic_queue_count",
                     "retry_after_s", "put_requests_in_flight_max",
                     "put_requests_per_client_max", "forward_frame_size_bytes_max",
                     "forward_frame_read_timeout_ms", "forward_write_buffer_bytes_max",
                     "forward_write_drain_timeout_ms", "forward_connections_max",
                     "delay_pass_interval_ms", "delay_deliveries_per_pass_max",
                     "delay_offsets_persist_interval_ms", "timer_precision_ms",
                     "timer_max_delay_s", "timer_log_file_size_bytes",
                     "timer_flush_interval_ms", "timer_pass_interval_ms",
                     "timer_enqueues_per_pass_max", "timer_deliveries_per_pass_max"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be positive")
        if not 0 <= self.forward_port <= 65535:
            raise ConfigError(f"forward_port={self.forward_port} must be in 0..65535")
        if not 2 <= self.timer_roll_window_slots <= SLOTS_TOTAL - 60:
            raise ConfigError(f"timer_roll_window_slots={self.timer_roll_window_slots} must "
                              f"be in 2..{SLOTS_TOTAL - 60} (the wheel's reach less a minute)")
        if self.timer_roll_window_slots * self.timer_precision_ms >= 1 << 30:
            raise ConfigError("timer_roll_window_slots x timer_precision_ms must stay below "
                              "2^30 ms: a timerlog unit holds its delay as a 32-bit int")


@dataclasses.dataclass(frozen=True, kw_only=True)
class IndexerSettings(ServiceSettings):
    """The reput/indexer service (services/indexer): its notice stream's bounds."""

    port: int = 8082

    notice_batch_latency_ms: int = 1
    """The most a notice waits to share a line with others: at high rates one line per 1 ms
    carries every queue that moved; after a quiet spell a notice goes out at once.  Dispatch
    passes come at most once per `dispatch_interval_ms` (1 ms) under load, so a pass's
    notices rarely wait; 2 ms made every notice at 1,000 msg/s wait up to 2 ms."""

    notice_subscriber_lines_max: int = 10_000
    """Lines queued for one notifier; one that falls this far behind is disconnected (it
    reconnects and starts from a fresh snapshot) instead of growing memory."""

    notice_heartbeat_interval_ms: int = 1000
    """A heartbeat line when nothing moved: lets a notifier tell a quiet stream from a dead
    one."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("notice_batch_latency_ms", "notice_subscriber_lines_max",
                     "notice_heartbeat_interval_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be positive")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NotifierSettings(ServiceSettings):
    """The pull-notifier service (services/notifier): long polling, notices, group offsets."""

    port: int = 8083

    indexer_url: str = "http://127.0.0.1:8082"
    """Where the indexer serves `GET /v1/notices` (in a pod the containers share localhost).
    Empty: no stream; held pulls then wake only on the `refresh_interval_ms` pass."""

    pull_wait_ms_max: int = 30_000
    """Longest `wait_ms` a pull may ask to be held.  RocketMQ's push consumer suspends for
    15 s within a 30 s client timeout; longer holds only tie up sockets."""

    held_requests_max: int = 1_000
    """Pulls held at once; beyond it a pull that would wait gets 503 + Retry-After.  Each holds
    a socket and a future: 1,000 stays under the common 1,024 open-files soft limit."""

    held_requests_per_client_max: int = 100
    """Pulls one client (remote address) may have held at once; beyond it a pull that would
    wait gets 429 + Retry-After.  A tenth of `held_requests_max`: one client cannot hold
    every slot (over `held_requests_max` it is that), and 100 held pulls cover a consumer
    of 100 queues (one per queue)."""

    groups_max: int = 10_000
    """Consumer groups with an offsets file; a commit for a new group past it gets 409
    GROUPS_FULL.  Each group is a file and a cached entry; RocketMQ keeps every group's
    offsets in one file, so its bound is that file's size."""

    group_offsets_file_bytes_max: int = 1 << 20
    """Largest offsets file of one group; a commit that would grow it past this gets 413
    GROUP_OFFSETS_TOO_LARGE.  About 20 bytes per queue: 1 MiB holds 50,000 queues' offsets."""

    pull_messages_max: int = 256
    """Largest `max_messages` of one pull or group poll: bounds one answer at about 350 KB
    of JSON for 1 KiB bodies (a single queue's get is also capped by get_transfer_count_max)."""

    group_poll_queue_share_min: int = 32
    """A group poll reads up to at least this many messages from each queue it visits
    (RocketMQ's `pullBatchSize`, 32), and the next poll of the topic goes on from the queue
    after the last one it read.  With 600 queues and 256 messages, a share of one message
    per queue made every message cost a whole queue read."""

    refresh_interval_ms: int = 1_000
    """How often the store view re-reads `dispatched` and `positions` and lists the queues: new
    queues, files retention deleted, and (while the stream is down) new data."""

    notice_silence_max_ms: int = 5_000
    """A stream silent this long (no line, not even the 1 s heartbeat) is dropped and
    reconnected: five missed heartbeats."""

    notice_reconnect_initial_ms: int = 100
    """First wait before reconnecting to the indexer; doubles per failure, with jitter."""

    notice_reconnect_max_ms: int = 5_000
    """Ceiling of that wait: an indexer restart (recovery of a few files) takes about this."""

    notice_line_bytes_max: int = 16 * MIB
    """Longest stream line read: a snapshot names every queue in ~50 bytes, so 16 MiB carries
    over 300,000 queues."""

    offsets_lock_timeout_ms: int = 5_000
    """How long a group offsets commit waits for another replica's commit of the same group
    (each holds the lock for one small write and two syncs); then 503."""

    retry_after_s: int = 1
    """Retry-After of a 503 (too many held pulls, offsets lock busy)."""

    pull_from_follower_memory_ratio: float = 0.4
    """RocketMQ `accessMessageInMemoryMaxRatio` (40): a pull whose newest message lies more
    than this share of the machine's memory behind the log's end reads what the page cache
    has likely dropped; its answer then says `suggest_pull_from_follower` (a follower's
    notifier serves the same messages and spares the master's disk)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("pull_wait_ms_max", "held_requests_max", "held_requests_per_client_max",
                     "groups_max", "group_offsets_file_bytes_max", "pull_messages_max",
                     "group_poll_queue_share_min",
                     "refresh_interval_ms", "notice_silence_max_ms",
                     "notice_reconnect_initial_ms", "notice_reconnect_max_ms",
                     "notice_line_bytes_max", "offsets_lock_timeout_ms", "retry_after_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be positive")
        if not 0 < self.pull_from_follower_memory_ratio <= 1:
            raise ConfigError(f"pull_from_follower_memory_ratio="
                              f"{self.pull_from_follower_memory_ratio} must be in (0, 1]")
        if self.notice_reconnect_initial_ms > self.notice_reconnect_max_ms:
            raise ConfigError(f"notice_reconnect_initial_ms={self.notice_reconnect_initial_ms}"
                              f" must not exceed notice_reconnect_max_ms="
                              f"{self.notice_reconnect_max_ms}")
        if self.indexer_url and not self.indexer_url.startswith(("http://", "https://")):
            raise ConfigError(f"indexer_url={self.indexer_url!r} must be http://host:port "
                              f"(or empty: no notice stream)")
