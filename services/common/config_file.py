"""The one config file every service, the CLI and the operator's ConfigMap read.

    data_dir: /data                     # the store directory (required)
    store:                              # exactly the StoreConfig fields (storage/config.py)
      segment_size_bytes: 1073741824
      flush_mode: sync                  # enums by value
    writer:                             # WriterSettings below
      port: 8081
    indexer: {port: 8082}
    notifier: {port: 8083}

Precedence, lowest first: the dataclass defaults, the file, then environment variables
`MQSTORE_<SECTION>__<FIELD>` (`MQSTORE_STORE__FLUSH_MODE=sync`, `MQSTORE_WRITER__PORT=8081`)
and `MQSTORE_DATA_DIR`.  A variable text is coerced by the field's type: ints, floats, bools
(true/false/1/0/yes/no), enums by value, and `tuple[int, ...]` as "4,5".  Unknown sections,
fields or `MQSTORE_*__*` variables, wrong types and bad values are a `ConfigError` naming the
key and where it came from; nothing is silently ignored or defaulted.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mqstore.storage import ConfigError, StoreConfig
from mqstore.storage.config_text import coerce_text

from .auth_settings import AuthSettings
from .config_values import field_types, from_yaml
from .remoting_settings import RemotingSettings
from .replication_settings import ReplicationSettings, check_role

ENV_PREFIX = "MQSTORE_"
ENV_DATA_DIR = "MQSTORE_DATA_DIR"
MIB = 1 << 20
LOG_LEVELS = ("debug", "info", "warning", "error")
EVENT_LOOPS = ("uvloop", "asyncio")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceSettings:
    """What every service has: where it listens, how long it drains, how much it logs."""

    host: str = "0.0.0.0"
    """Listen address.  All interfaces: in a pod the probes and Prometheus come from outside."""

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

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port={self.port} must be in 0..65535")
        if self.shutdown_timeout_ms <= 0:
            raise ConfigError(f"shutdown_timeout_ms={self.shutdown_timeout_ms} must be positive")
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

    forward_enabled: bool = True
    """Serve the forward listener: the remoting front's sends, RocketMQ-encoded, over one
    persistent connection (services/writer/forward_server.py)."""

    forward_host: str = "127.0.0.1"
    """The forward listener's address.  Loopback: the front runs in the notifier container
    of the same pod (or under `mqstore up` on the same machine), and the listener takes
    writes without any check, so it is not offered to the network unless asked."""

    forward_port: int = 8085
    """The forward listener's port (0: any free port, named in its log line)."""

    forward_frame_size_bytes_max: int = 16 * MIB
    """Largest forwarded send read: the front's own frame bound (a batch of 4 MiB bodies)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("request_body_size_bytes_max", "batch_messages_max", "topic_queue_count",
                     "retry_after_s", "put_requests_in_flight_max",
                     "forward_frame_size_bytes_max"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be positive")
        if not 0 <= self.forward_port <= 65535:
            raise ConfigError(f"forward_port={self.forward_port} must be in 0..65535")


@dataclasses.dataclass(frozen=True, kw_only=True)
class IndexerSettings(ServiceSettings):
    """The reput/indexer service (services/indexer): its notice stream's bounds."""

    port: int = 8082

    notice_batch_latency_ms: int = 2
    """The most a notice waits to share a line with others: at high rates one line per 2 ms
    carries every queue that moved; after a quiet spell a notice goes out at once."""

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
        for name in ("pull_wait_ms_max", "held_requests_max", "pull_messages_max",
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


SECTIONS: dict[str, type[Any]] = {"store": StoreConfig, "writer": WriterSettings,
                                  "indexer": IndexerSettings, "notifier": NotifierSettings,
                                  "replication": ReplicationSettings,
                                  "remoting": RemotingSettings, "auth": AuthSettings}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """The whole file, loaded and checked."""

    data_dir: Path
    store: StoreConfig
    writer: WriterSettings
    indexer: IndexerSettings
    notifier: NotifierSettings
    replication: ReplicationSettings = dataclasses.field(default_factory=ReplicationSettings)
    remoting: RemotingSettings = dataclasses.field(default_factory=RemotingSettings)
    auth: AuthSettings = dataclasses.field(default_factory=AuthSettings)
    source: str = "defaults"
    """Where it was read from (named in errors raised later, e.g. by the writer's checks)."""

    def __post_init__(self) -> None:
        # One largest message must fit in a request in any encoding: base64 body (4/3),
        # properties as JSON text, and 4 KiB for topic, tags and syntax.
        needed = (self.store.message_body_size_bytes_max * 4 // 3
                  + self.store.properties_size_bytes_max + 4096)
        if self.writer.request_body_size_bytes_max < needed:
            raise ConfigError(
                f"{self.source}: writer.request_body_size_bytes_max="
                f"{self.writer.request_body_size_bytes_max} cannot carry one largest message "
                f"(store.message_body_size_bytes_max={self.store.message_body_size_bytes_max}"
                f" as base64 plus properties): it must be at least {needed}")
        check_role(self.store.role, self.replication, source=self.source)


def load_config(path: str | Path | None, *,
                environ: Mapping[str, str] | None = None) -> ServiceConfig:
    """Read `path` (None: defaults only), apply the environment, check everything."""
    environ = os.environ if environ is None else environ
    source = str(path) if path is not None else "defaults"
    document = _read_yaml(Path(path)) if path is not None else {}
    values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    data_dir: object = None
    for key, section in document.items():
        if key == "data_dir":
            data_dir = section
            continue
        if key not in SECTIONS:
            raise ConfigError(f"{source}: unknown section {key!r}; expected data_dir, "
                              f"{', '.join(SECTIONS)}")
        values[key].update(_sectionfrom_yaml(key, section, source=source))
    data_dir = _apply_environment(values, data_dir, environ)
    if not isinstance(data_dir, str) or not data_dir:
        raise ConfigError(f"{source}: data_dir is required (a directory path), got "
                          f"{data_dir!r}; set it in the file or as {ENV_DATA_DIR}")
    built = {name: _build(name, cls, values[name], source=source)
             for name, cls in SECTIONS.items()}
    return ServiceConfig(data_dir=Path(data_dir), source=source, **built)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file: {error.strerror}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: the file must hold a mapping of sections, not "
                          f"{type(document).__name__}")
    return document


def _sectionfrom_yaml(section: str, body: object, *, source: str) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise ConfigError(f"{source}: {section} must be a mapping of settings, not "
                          f"{type(body).__name__}")
    types = field_types(SECTIONS[section])
    values = {}
    for name, value in body.items():
        where = f"{source}: {section}.{name}"
        if name not in types:
            raise ConfigError(f"{where}: unknown setting; {section} has "
                              f"{', '.join(sorted(types))}")
        values[name] = from_yaml(value, types[name], where=where)
    return values


def _apply_environment(values: dict[str, dict[str, Any]], data_dir: object,
                       environ: Mapping[str, str]) -> object:
    for variable, text in sorted(environ.items()):
        if variable == ENV_DATA_DIR:
            data_dir = text
            continue
        if not variable.startswith(ENV_PREFIX) or "__" not in variable:
            continue
        section, _, name = variable[len(ENV_PREFIX):].lower().partition("__")
        where = f"environment {variable}"
        if section not in SECTIONS:
            raise ConfigError(f"{where}: unknown section {section!r}; expected "
                              f"{', '.join(SECTIONS)}")
        types = field_types(SECTIONS[section])
        if name not in types:
            raise ConfigError(f"{where}: unknown setting {section}.{name}")
        values[section][name] = coerce_text(text, types[name], where=where)
    return data_dir


def _build(section: str, cls: type[Any], values: dict[str, Any], *, source: str) -> Any:
    try:
        return cls(**values)
    except ConfigError as error:
        raise ConfigError(f"{source}: {section}: {error}") from None
