"""`MessageEncoder`: a `Message` to unstamped record bytes, outside the put lock.

Everything that can be wrong with a message is found here and raised as
`MessageIllegalError` with the reason (the put path returns MESSAGE_ILLEGAL).  This is the
hot path of every put, so per-topic and per-host work is cached (bounded) and the common
message (no properties, no born host, flag 0) takes the shortest route.
"""

from __future__ import annotations

import time
import zlib

from . import record
from .config import StoreConfig
from .errors import ConfigError, MessageIllegalError, TopicNameError
from .hosts import parse_host
from .message import Message
from .padding import PADDING_TOPIC, PADDING_TOPIC_BYTES
from .properties import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_TAGS, encode_properties
from .topic import validate_topic

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
CACHE_ENTRIES_MAX = 4096
"""Bound on remembered topics and born hosts each; a full cache is cleared, not grown."""

_EMPTY_PROPERTIES_TAIL = b"\x00\x00"
_time_ns = time.time_ns
_crc32 = zlib.crc32


class MessageEncoder:
    """Encodes messages for one store's settings (store host, size maxima)."""

    def __init__(self, config: StoreConfig) -> None:
        self._config = config
        self._body_size_max = config.message_body_size_bytes_max
        address, port = parse_host(config.store_host, setting="store_host")
        self.store_host = (address, port)
        self.store_host_packed = address + port.to_bytes(4, "big", signed=True)
        self._store_v6 = len(address) == 16
        self._layouts = {(born_v6, v2): record.LAYOUTS[born_v6, self._store_v6, v2]
                         for born_v6 in (False, True) for v2 in (False, True)}
        self._topic_tails: dict[str, tuple[bytes, bool]] = {}
        self._born_hosts: dict[str, tuple[bytes, int]] = {}

    def encode(self, message: Message) -> tuple[bytes, int]:
        """Return (record bytes, offset of STORETIMESTAMP within them), with QUEUEOFFSET,
        PHYSICALOFFSET and STORETIMESTAMP 0 for the put path to stamp under its lock."""
        parts: list[bytes] = []
        _, store_timestamp_offset = self.encode_into(parts, message, _time_ns() // 1_000_000,
                                                     0, 0, 0)
        return b"".join(parts), store_timestamp_offset

    def encode_into(self, parts: list[bytes], message: Message, now_ms: int, queue_offset: int,
                    physical_offset: int, store_timestamp_ms: int) -> tuple[int, int]:
        """Append the record's pieces to `parts` (a batch joins them all at once); return
        (record size, offset of STORETIMESTAMP).  `now_ms` is the born time when the
        message has none; the last three are written as given (0, or a batch's prediction
        of where it will land).  The head is packed in `record.RECORD_FIELDS` order."""
        cached = self._topic_tails.get(message.topic)
        topic_tail, v2 = cached if cached is not None else self._topic_tail(message.topic)
        body = message.body
        if type(body) is not bytes:
            body = _coerce_body(body)
        body_size = len(body)
        if body_size > self._body_size_max:
            raise MessageIllegalError(f"body is {body_size} bytes; the maximum is "
                                      f"{self._body_size_max} (message_body_size_bytes_max)")
        queue_id = message.queue_id
        if type(queue_id) is not int or not 0 <= queue_id <= INT32_MAX:
            raise MessageIllegalError(f"queue_id={queue_id!r} must be an int in "
                                      f"[0, {INT32_MAX}]")
        flag = message.flag
        if flag and (type(flag) is not int or not INT32_MIN <= flag <= INT32_MAX):
            raise MessageIllegalError(f"flag={flag!r} must be a 32-bit int")
        born_ms = message.born_timestamp_ms
        if born_ms is None:
            born_ms = now_ms
        if (message.properties is None and message.tags is None and not message.keys
                and message.born_host is None):
            properties_tail = _EMPTY_PROPERTIES_TAIL  # the common message: no per-field work
            born_host = store_host = self.store_host
            layout = self._layouts[self._store_v6, v2]
        else:
            properties_tail, born_host, layout = self._uncommon_fields(message, v2=v2)
            store_host = self.store_host
        head = layout.head
        size = head.size + body_size + len(topic_tail) + len(properties_tail)
        parts += (head.pack(size, layout.magic, _crc32(body) & 0x7FFFFFFF, queue_id, flag,
                            queue_offset, physical_offset, layout.host_sysflag, born_ms,
                            born_host[0], born_host[1], store_timestamp_ms, store_host[0],
                            store_host[1], 0, 0, body_size),
                  body, topic_tail, properties_tail)
        return size, layout.store_timestamp_offset

    def _uncommon_fields(self, message: Message, *, v2: bool
                         ) -> tuple[bytes, tuple[bytes, int], record.RecordLayout]:
        """Properties tail, born host and layout of a message with properties, tags, keys
        or its own born host."""
        if message.properties is None and message.tags is None and not message.keys:
            properties_tail = _EMPTY_PROPERTIES_TAIL
        else:
            properties_tail = self._properties_tail(message, v2=v2)
        if message.born_host is None:
            return properties_tail, self.store_host, self._layouts[self._store_v6, v2]
        born_host = self._born_host(message.born_host)
        return properties_tail, born_host, self._layouts[len(born_host[0]) == 16, v2]

    def _topic_tail(self, topic: object) -> tuple[bytes, bool]:
        try:
            encoded = validate_topic(topic, size_bytes_max=self._config.topic_size_bytes_max)
        except TopicNameError as error:
            raise MessageIllegalError(str(error)) from None
        if encoded == PADDING_TOPIC_BYTES:
            raise MessageIllegalError(f"topic {PADDING_TOPIC!r} is reserved for the group "
                                      f"commit's filler records")
        v2 = len(encoded) > record.TOPIC_LENGTH_V1_MAX
        tail = (self._layouts[False, v2].topic_tail(encoded), v2)
        if len(self._topic_tails) >= CACHE_ENTRIES_MAX:
            self._topic_tails.clear()
        assert isinstance(topic, str)
        self._topic_tails[topic] = tail
        return tail

    def _properties_tail(self, message: Message, *, v2: bool) -> bytes:
        merged = dict(message.properties or {})
        if message.tags is not None:
            merged[PROPERTY_TAGS] = message.tags
        if message.keys:
            if isinstance(message.keys, str):
                raise MessageIllegalError("keys must be a sequence of strings, not one string")
            for key in message.keys:
                if not isinstance(key, str) or not key or KEY_SEPARATOR in key:
                    raise MessageIllegalError(f"key {key!r} must be a non-empty string "
                                              f"without spaces")
            merged[PROPERTY_KEYS] = KEY_SEPARATOR.join(message.keys)
        encoded = encode_properties(merged)
        if len(encoded) > self._config.properties_size_bytes_max:
            raise MessageIllegalError(f"properties are {len(encoded)} bytes encoded; the "
                                      f"maximum is {self._config.properties_size_bytes_max}")
        return self._layouts[False, v2].properties_tail(encoded)

    def _born_host(self, text: str) -> tuple[bytes, int]:
        host = self._born_hosts.get(text)
        if host is None:
            try:
                host = parse_host(text, setting="born_host")
            except ConfigError as error:
                raise MessageIllegalError(str(error)) from None
            if len(self._born_hosts) >= CACHE_ENTRIES_MAX:
                self._born_hosts.clear()
            self._born_hosts[text] = host
        return host


def _coerce_body(body: object) -> bytes:
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    raise MessageIllegalError(f"body must be bytes, not {type(body).__name__}")
