"""The engine's message values: what a producer hands in, what a put returns, what a read gives.

`encoder.MessageEncoder` turns a `Message` into record bytes outside the put lock.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Mapping, Sequence

from . import record
from .properties import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_TAGS, decode_properties


class PutStatus(enum.Enum):
    """RocketMQ `PutMessageStatus` (the subset this engine can produce)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    """Sync master: stored here, but no follower confirmed it in `replication_sync_timeout_ms`."""
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    """Sync master: stored here, but no follower was connected within
    `replication_lag_bytes_max` of it, so none could confirm it."""


class Message:
    """A message to store.  `keys` become the KEYS property, `tags` the TAGS property.

    A message that arrives already encoded by a RocketMQ client (the remoting front) keeps
    its properties as the client encoded them (`properties_encoded`, stored byte for byte,
    instead of `tags`/`keys`/`properties`), its SYSFLAG bits (`sysflag`: compression and
    transaction bits; the host-family bits come from the record's layout) and its
    `reconsume_times`."""

    __slots__ = ("body", "born_host", "born_timestamp_ms", "flag", "keys", "properties",
                 "properties_encoded", "queue_id", "reconsume_times", "sysflag", "tags",
                 "topic")

    def __init__(self, topic: str, queue_id: int, body: bytes, tags: str | None = None,
                 keys: Sequence[str] = (), properties: Mapping[str, str] | None = None, *,
                 flag: int = 0, born_host: str | None = None,
                 born_timestamp_ms: int | None = None, sysflag: int = 0,
                 reconsume_times: int = 0, properties_encoded: bytes | None = None) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.body = body
        self.tags = tags
        self.keys = keys
        self.properties = properties
        self.flag = flag
        self.born_host = born_host
        self.born_timestamp_ms = born_timestamp_ms
        self.sysflag = sysflag
        self.reconsume_times = reconsume_times
        self.properties_encoded = properties_encoded

    def __repr__(self) -> str:
        return (f"Message(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"body=<{len(self.body)} bytes>, tags={self.tags!r}, keys={self.keys!r})")


class PutResult:
    """The outcome of one put.  `msg_id` (RocketMQ's offset msg id) is computed on first use."""

    __slots__ = ("_store_host_packed", "physical_offset", "queue_offset", "reason", "size_bytes",
                 "status", "store_timestamp_ms")

    def __init__(self, status: PutStatus, physical_offset: int = -1, queue_offset: int = -1,
                 store_timestamp_ms: int = 0, size_bytes: int = 0, reason: str = "",
                 store_host_packed: bytes = b"") -> None:
        self.status = status
        self.physical_offset = physical_offset
        self.queue_offset = queue_offset
        self.store_timestamp_ms = store_timestamp_ms
        self.size_bytes = size_bytes
        self.reason = reason
        self._store_host_packed = store_host_packed

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def end_position(self) -> int:
        """The commit log position after this record (-1 if nothing was stored): what
        `MessageStore.wait_dispatched` waits for."""
        if self.physical_offset < 0:
            return -1
        return self.physical_offset + self.size_bytes

    @property
    def msg_id(self) -> str:
        if self.physical_offset < 0:
            return ""
        return offset_msg_id(self._store_host_packed, self.physical_offset)

    def __repr__(self) -> str:
        return (f"PutResult({self.status.name}, physical_offset={self.physical_offset}, "
                f"queue_offset={self.queue_offset}, reason={self.reason!r})")


def offset_msg_id(store_host_packed: bytes, physical_offset: int) -> str:
    """Hex of store address + int32 port + int64 position (32 characters for IPv4)."""
    return (store_host_packed + physical_offset.to_bytes(8, "big")).hex().upper()


def format_host(host: tuple[bytes, int]) -> str:
    address = ipaddress.ip_address(host[0])
    if address.version == 6:
        return f"[{address}]:{host[1]}"
    return f"{address}:{host[1]}"


class StoredMessage:
    """Every decoded field of one record, as RocketMQ's `MessageExt` would hold them."""

    __slots__ = ("_born_host", "_store_host", "body", "body_crc", "born_timestamp_ms", "flag",
                 "magic",
                 "physical_offset", "prepared_transaction_offset", "properties", "queue_id",
                 "queue_offset", "reconsume_times", "store_timestamp_ms",
                 "sysflag", "topic", "total_size")

    def __init__(self, head: record.RecordHead, *, body: bytes | memoryview, topic: str,
                 properties: dict[str, str]) -> None:
        self.total_size = head.total_size
        self.magic = head.magic
        self.body_crc = head.body_crc
        self.queue_id = head.queue_id
        self.flag = head.flag
        self.queue_offset = head.queue_offset
        self.physical_offset = head.physical_offset
        self.sysflag = head.sysflag
        self.born_timestamp_ms = head.born_timestamp_ms
        self._born_host = head.born_host
        self.store_timestamp_ms = head.store_timestamp_ms
        self._store_host = head.store_host
        self.reconsume_times = head.reconsume_times
        self.prepared_transaction_offset = head.prepared_transaction_offset
        self.body = body
        self.topic = topic
        self.properties = properties

    @property
    def born_host(self) -> str:
        """"ip:port" ("[ipv6]:port"); formatted on first use (it costs more than decoding)."""
        return format_host(self._born_host)

    @property
    def store_host(self) -> str:
        return format_host(self._store_host)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> tuple[str, ...]:
        text = self.properties.get(PROPERTY_KEYS, "")
        return tuple(key for key in text.split(KEY_SEPARATOR) if key)

    @property
    def msg_id(self) -> str:
        address, port = self._store_host
        return offset_msg_id(address + port.to_bytes(4, "big", signed=True), self.physical_offset)

    def __repr__(self) -> str:
        return (f"StoredMessage(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"queue_offset={self.queue_offset}, physical_offset={self.physical_offset}, "
                f"body=<{len(self.body)} bytes>)")


def decode_stored(buffer: record.ReadableBuffer, position: int) -> StoredMessage:
    """Decode the whole record at `position` (the body is copied out of `buffer`)."""
    layout, head = record.decode_head(buffer, position)
    body, topic, properties = record.decode_variable(buffer, position, layout, head)
    try:
        return StoredMessage(head, body=bytes(body), topic=topic.decode("utf-8", "replace"),
                             properties=decode_properties(properties))
    finally:
        body.release()
