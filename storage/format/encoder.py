"""`MessageEncoder`: a `Message` checked and CRC'd outside the put lock; the record writers.

`prepare` does everything that does not depend on where the record lands (checks, CRC,
sizes, the cached topic tail) and returns a `PreparedRecord`.  The put path (commitlog.py)
then writes it with `write_record`: the head with the offsets and times packed straight into
the segment (or pool buffer), body and tail copied after it; no record is assembled in a
temporary buffer and copied again.  A batch is packed whole by `pack_batch` (one bytes
object, copied once under the lock).  Both write the record as record.py lays it out:

    head   every field of `record.RECORD_FIELDS` through BODYLEN, in order (88 bytes for
           IPv4 hosts; QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP as given; BORNTIMESTAMP
           the store time when the message has none; PREPAREDTXOFFSET 0)
    body   the message body
    tail   TOPICLEN + TOPIC, PROPLEN + PROPERTIES (`PreparedRecord`'s tail, as cached)

Both have a C twin (storage/format/_records.c, docs/compiled.md) that also builds the
`PutResult`s; the functions here are the definition.  A test holds the bytes they write to
`record.encode_record`, the reference encoder.

Everything that can be wrong with a message is found here and raised as
`MessageIllegalError` with the reason (the put path returns MESSAGE_ILLEGAL).  This is the
hot path of every put, so per-topic and per-host work is cached (bounded) and the common
message (no properties, no born host, flag 0) takes the shortest route.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from functools import cache
from typing import Any, cast

from ..config import StoreConfig
from ..errors import ConfigError, MessageIllegalError, TopicNameError
from . import compiled, record
from .hosts import parse_host
from .message import Message, PutResult, PutStatus
from .padding import PADDING_TOPIC, PADDING_TOPIC_BYTES
from .properties import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_TAGS, encode_properties
from .topic import validate_topic

PreparedRecord = tuple[record.RecordLayout, int, int, int, int, int, tuple[bytes, int], bytes,
                       bytes, tuple[bytes, int], int, int]
"""A checked message, ready to write under the put lock: (layout, record size, body CRC,
queue id, flag, born time in ms or -1 for "the store time", born host, body, tail (topic
and properties, length-prefixed), store host, SYSFLAG (the message's bits and the layout's
host bits), reconsume times).  A tuple, not a class: the put path makes one per message and
unpacks it by position."""

CommonEntry = tuple[record.RecordLayout, bytes, int, int]
MESSAGE_SLOTS = ("topic", "queue_id", "body", "flag", "born_timestamp_ms", "sysflag",
                 "reconsume_times", "properties", "tags", "keys", "born_host",
                 "properties_encoded")
"""The `Message` slots the C `prepare` reads, in the order it expects them."""
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
HOST_SYSFLAG_BITS = record.SysFlag.BORN_HOST_V6 | record.SysFlag.STORE_HOST_V6
"""Bits a message's own SYSFLAG may not set: the record's layout decides them."""
CACHE_ENTRIES_MAX = 4096
"""Bound on remembered topics and born hosts each; a full cache is cleared, not grown."""

_EMPTY_PROPERTIES_TAIL = b"\x00\x00"
_crc32 = zlib.crc32
_PUT_OK = PutStatus.PUT_OK


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
        self._common: dict[str, CommonEntry] = {}
        """Topic → what `prepare` needs for a message with no properties or born host (the
        C twin reads this very dict: cleared when full, never replaced)."""
        self.prepare: Callable[[Message], PreparedRecord] = compiled.pick(
            self.prepare_reference, self._compiled_prepare)
        """`prepare_reference`'s C twin (it answers the common message and hands every
        other to the reference), or the reference itself when MQSTORE_NO_EXTENSIONS=1."""

    def _compiled_prepare(self) -> Callable[[Message], PreparedRecord]:
        return cast("Callable[[Message], PreparedRecord]", compiled.extension().bind_prepare(
            self.prepare_reference, Message, MESSAGE_SLOTS, self._common, self._body_size_max,
            self.store_host))

    def prepare_reference(self, message: Message) -> PreparedRecord:
        """Check `message` and return what the put path writes for it under its lock (see
        `PreparedRecord`); raises `MessageIllegalError` with the reason."""
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
        store_host = self.store_host
        sysflag, reconsume_times = message.sysflag, message.reconsume_times
        if sysflag or reconsume_times:
            _check_sysflag(sysflag, reconsume_times)
        if (message.properties is None and message.tags is None and not message.keys
                and message.born_host is None and message.properties_encoded is None):
            # The common message: layout, whole tail and fixed size come from one lookup.
            common = self._common.get(message.topic)
            if common is None:
                common = self._common_entry(message.topic)
            layout, tail, fixed_size_bytes, _ = common
            return (layout, fixed_size_bytes + body_size, _crc32(body) & 0x7FFFFFFF, queue_id,
                    flag, -1 if born_ms is None else born_ms, store_host, body, tail, store_host,
                    sysflag | layout.host_sysflag, reconsume_times)
        cached = self._topic_tails.get(message.topic)
        topic_tail, v2 = cached if cached is not None else self._topic_tail(message.topic)
        properties_tail, born_host, layout = self._uncommon_fields(message, v2=v2)
        tail = topic_tail + properties_tail
        return (layout, layout.head.size + body_size + len(tail), _crc32(body) & 0x7FFFFFFF,
                queue_id, flag, -1 if born_ms is None else born_ms, born_host, body, tail,
                store_host, sysflag | layout.host_sysflag, reconsume_times)

    def _common_entry(self, topic: object) -> CommonEntry:
        """(layout, topic + empty properties tail, record size without the body, the
        layout's host SYSFLAG bits) of a message with only a topic, queue and body; the
        topic is checked on the way."""
        topic_tail, v2 = self._topic_tail(topic)
        layout = self._layouts[self._store_v6, v2]
        tail = topic_tail + _EMPTY_PROPERTIES_TAIL
        if len(self._common) >= CACHE_ENTRIES_MAX:
            self._common.clear()
        assert isinstance(topic, str)
        entry = self._common[topic] = (layout, tail, layout.head.size + len(tail),
                                       layout.host_sysflag)
        return entry

    def _uncommon_fields(self, message: Message, *, v2: bool
                         ) -> tuple[bytes, tuple[bytes, int], record.RecordLayout]:
        """Properties tail, born host and layout of a message with properties, tags, keys
        or its own born host."""
        if message.properties_encoded is not None:
            properties_tail = self._encoded_properties_tail(message, v2=v2)
        elif message.properties is None and message.tags is None and not message.keys:
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

    def _encoded_properties_tail(self, message: Message, *, v2: bool) -> bytes:
        """Properties as a RocketMQ client encoded them: stored as they are (the indexer
        reads TAGS, KEYS and UNIQ_KEY from the record); only their size is checked."""
        encoded = message.properties_encoded
        assert encoded is not None
        if message.properties is not None or message.tags is not None or message.keys:
            raise MessageIllegalError("properties_encoded excludes tags, keys and properties")
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


def _check_sysflag(sysflag: object, reconsume_times: object) -> None:
    if type(sysflag) is not int or not 0 <= sysflag <= INT32_MAX or sysflag & HOST_SYSFLAG_BITS:
        raise MessageIllegalError(f"sysflag={sysflag!r} must be a 31-bit int without the "
                                  f"host-family bits 0x30 (the record's layout sets them)")
    if type(reconsume_times) is not int or not 0 <= reconsume_times <= INT32_MAX:
        raise MessageIllegalError(f"reconsume_times={reconsume_times!r} must be an int in "
                                  f"[0, {INT32_MAX}]")


def _coerce_body(body: object) -> bytes:
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    raise MessageIllegalError(f"body must be bytes, not {type(body).__name__}")


def write_record_reference(target: record.WritableBuffer, position: int,
                           prepared: PreparedRecord, queue_offset: int, physical_offset: int,
                           store_timestamp_ms: int, store_host_packed: bytes, /) -> PutResult:
    """Write the record of `prepared` at `position` of `target` (layout: module docstring),
    stamped with the queue offset, its physical offset and the store time; its PutResult."""
    (layout, size, crc, queue_id, flag, born_ms, born_host, body, tail, store_host, sysflag,
     reconsume_times) = prepared
    head = layout.head
    head.pack_into(target, position, size, layout.magic, crc, queue_id, flag, queue_offset,
                   physical_offset, sysflag, store_timestamp_ms if born_ms < 0 else born_ms,
                   born_host[0], born_host[1], store_timestamp_ms, store_host[0], store_host[1],
                   reconsume_times, 0, len(body))
    body_at = position + head.size
    tail_at = body_at + len(body)
    target[body_at:tail_at] = body
    target[tail_at:position + size] = tail
    return PutResult(_PUT_OK, physical_offset, queue_offset, store_timestamp_ms, size, "",
                     store_host_packed)


def pack_batch_reference(records: list[PreparedRecord], queue_offsets: list[int],
                         physical_offset: int, store_timestamp_ms: int,
                         store_host_packed: bytes, /) -> tuple[bytes, list[PutResult]]:
    """The records of a batch, back to back from `physical_offset` (each laid out as
    `write_record_reference` writes it, with its queue offset), and their PutResults."""
    parts: list[bytes] = []
    results: list[PutResult] = []
    for prepared, queue_offset in zip(records, queue_offsets, strict=True):
        (layout, size, crc, queue_id, flag, born_ms, born_host, body, tail, store_host,
         sysflag, reconsume_times) = prepared
        parts += (layout.head.pack(size, layout.magic, crc, queue_id, flag, queue_offset,
                                   physical_offset, sysflag,
                                   store_timestamp_ms if born_ms < 0 else born_ms,
                                   born_host[0], born_host[1], store_timestamp_ms,
                                   store_host[0], store_host[1], reconsume_times, 0,
                                   len(body)),
                  body, tail)
        results.append(PutResult(_PUT_OK, physical_offset, queue_offset, store_timestamp_ms,
                                 size, "", store_host_packed))
        physical_offset += size
    return b"".join(parts), results


WriteRecord = Callable[[record.WritableBuffer, int, PreparedRecord, int, int, int, bytes],
                       PutResult]
PackBatch = Callable[[list[PreparedRecord], list[int], int, int, bytes],
                     tuple[bytes, list[PutResult]]]
PUT_RESULT_SLOTS = ("status", "physical_offset", "queue_offset", "store_timestamp_ms",
                    "size_bytes", "reason", "_store_host_packed")
"""PutResult's slots in the order of its constructor's arguments (the C twins set them)."""


def compiled_record_writers(write_reference: WriteRecord | None = None,
                            pack_reference: PackBatch | None = None
                            ) -> tuple[WriteRecord, PackBatch]:
    """`write_record_reference` and `pack_batch_reference` in C (storage/format/_records.c),
    told every layout's field offsets and PutResult; ImportError if the extension is not
    built.  The C functions hand what they do not answer to the references (a test passes
    its own, to see which calls they answer)."""
    fields = record.RECORD_FIELDS[:len(record.RecordHead._fields)]
    kinds = "".join({"host": "h", "bytes:i": "i"}.get(field.kind, field.kind)
                    for field in fields)
    layouts = tuple(
        (layout, tuple(layout.offsets[field.name] for field in fields),
         16 if layout.born_v6 else 4, 16 if layout.store_v6 else 4, layout.head.size,
         layout.magic)
        for _, layout in sorted(record.LAYOUTS.items()))
    pair = compiled.extension().bind_record_writer(
        write_reference or write_record_reference, pack_reference or pack_batch_reference,
        PutResult, PUT_RESULT_SLOTS, _PUT_OK, layouts, kinds)
    return cast("tuple[WriteRecord, PackBatch]", pair)


_compiled_writers = cache(compiled_record_writers)


def _compiled_write() -> Callable[..., Any]:
    return _compiled_writers()[0]


def _compiled_pack() -> Callable[..., Any]:
    return _compiled_writers()[1]


write_record = compiled.pick(write_record_reference, _compiled_write)
"""Write one prepared record (see `write_record_reference`): the C twin, or the reference
itself when MQSTORE_NO_EXTENSIONS=1."""
pack_batch = compiled.pick(pack_batch_reference, _compiled_pack)
"""Pack a batch's prepared records (see `pack_batch_reference`): the C twin, or the
reference itself when MQSTORE_NO_EXTENSIONS=1."""
