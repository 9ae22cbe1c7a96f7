"""The commit log record: RocketMQ's message layout, v1 and v2, IPv4 and IPv6 hosts.

`RECORD_FIELDS` below is the single source of truth.  Every `RecordLayout` (one per
combination of born-host family, store-host family and version) is derived from it, and the
encoder, the decoder, `record_size()` and the fixed-position patch offsets all come from the
layout.  Big-endian throughout.  With IPv4 hosts and a v1 record:

    @0   TOTALSIZE            int32   whole record, this field included
    @4   MAGICCODE            int32   0xDAA320A7 (v1) / 0xDAA320AB (v2: 2-byte topic length)
    @8   BODYCRC              int32   zlib.crc32(body) & 0x7FFFFFFF
    @12  QUEUEID              int32
    @16  FLAG                 int32   user flag
    @20  QUEUEOFFSET          int64   logical index in the consume queue (a count)
    @28  PHYSICALOFFSET       int64   this record's commit log position
    @36  SYSFLAG              int32   see SysFlag
    @40  BORNTIMESTAMP        int64   ms
    @48  BORNHOST             4+4     IPv4 + int32 port   (16+4 when SysFlag.BORN_HOST_V6)
    @56  STORETIMESTAMP       int64   ms, stamped under the put lock
    @64  STOREHOST            4+4     IPv4 + int32 port   (16+4 when SysFlag.STORE_HOST_V6)
    @72  RECONSUMETIMES       int32
    @76  PREPAREDTXOFFSET     int64
    @84  BODYLEN + BODY       4+n
         TOPICLEN + TOPIC     1+t (v1) / 2+t (v2)
         PROPLEN + PROPERTIES 2+p
    total = 91 + n + t + p   (+12 per IPv6 host, +1 for v2)

A full segment ends with a BLANK record: int32 size of the rest of the file, int32 0xCBD43194.
"""

from __future__ import annotations

import dataclasses
import enum
import mmap
import struct
import zlib
from collections.abc import Callable
from typing import NamedTuple, cast

from . import compiled

MAGIC_V1 = -626843481  # 0xDAA320A7 as a Java int
MAGIC_V2 = -626843477  # 0xDAA320AB
MAGIC_BLANK = -875286124  # 0xCBD43194
BLANK_SIZE_BYTES = 8
"""A BLANK record is TOTALSIZE + MAGIC only; the rest of the segment stays zero."""

TOPIC_LENGTH_V1_MAX = 127
"""v1 stores the topic length in one byte that RocketMQ reads signed: > 127 needs v2."""

ReadableBuffer = bytes | bytearray | memoryview | mmap.mmap
WritableBuffer = bytearray | memoryview | mmap.mmap

_BLANK = struct.Struct(">ii")
_SIZE_AND_MAGIC = struct.Struct(">ii")
assert _BLANK.size == BLANK_SIZE_BYTES


class SysFlag(enum.IntFlag):
    """SYSFLAG bits (RocketMQ `MessageSysFlag`)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORN_HOST_V6 = 0x10
    STORE_HOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80


TRANSACTION_TYPE_MASK = 0xC
OFFSETLESS_TRANSACTION_TYPES = (SysFlag.TRANSACTION_PREPARED, SysFlag.TRANSACTION_ROLLBACK)


def takes_queue_offset(sysflag: int) -> bool:
    """Whether a record of this SYSFLAG takes a queue offset and a consume queue entry.

    RocketMQ's CommitLog stores a prepared or rolled-back transaction record with queue offset
    0 and does not advance the queue's counter; dispatch puts no entry for it.  The writer,
    recovery and dispatch all ask this one function, so they cannot disagree (a writer that
    gave such a record an offset left a hole dispatch could not fill)."""
    return sysflag & TRANSACTION_TYPE_MASK not in OFFSETLESS_TRANSACTION_TYPES


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of the record.  `kind` is a struct code, "host", or "bytes:<prefix code>"."""

    name: str
    kind: str


RECORD_FIELDS: tuple[Field, ...] = (
    Field("total_size", "i"),
    Field("magic", "i"),
    Field("body_crc", "i"),
    Field("queue_id", "i"),
    Field("flag", "i"),
    Field("queue_offset", "q"),
    Field("physical_offset", "q"),
    Field("sysflag", "i"),
    Field("born_timestamp_ms", "q"),
    Field("born_host", "host"),
    Field("store_timestamp_ms", "q"),
    Field("store_host", "host"),
    Field("reconsume_times", "i"),
    Field("prepared_transaction_offset", "q"),
    Field("body", "bytes:i"),
    Field("topic", "bytes:topic"),
    Field("properties", "bytes:H"),
)


@dataclasses.dataclass(frozen=True, slots=True)
class RecordLayout:
    """The byte layout for one (born host family, store host family, version) combination.

    `head` packs every field up to and including BODYLEN; hosts are two struct items (packed
    address, port).  `offsets` gives each fixed field's byte offset within the record.
    """

    born_v6: bool
    store_v6: bool
    v2: bool
    head: struct.Struct
    offsets: dict[str, int]
    topic_length: struct.Struct
    properties_length: struct.Struct
    magic: int
    host_sysflag: int
    """The SYSFLAG bits this layout implies (IPv6 born/store hosts)."""
    store_timestamp_offset: int

    @property
    def body_offset(self) -> int:
        return self.head.size

    def topic_tail(self, topic: bytes) -> bytes:
        return self.topic_length.pack(len(topic)) + topic

    def properties_tail(self, properties: bytes) -> bytes:
        return self.properties_length.pack(len(properties)) + properties

    def record_size(self, *, body_bytes: int, topic_bytes: int, properties_bytes: int) -> int:
        return (self.head.size + body_bytes + self.topic_length.size + topic_bytes
                + self.properties_length.size + properties_bytes)


def _build_layout(*, born_v6: bool, store_v6: bool, v2: bool) -> RecordLayout:
    codes = [">"]
    offsets: dict[str, int] = {}
    position = 0
    for field in RECORD_FIELDS:
        offsets[field.name] = position
        if field.kind == "host":
            v6 = born_v6 if field.name == "born_host" else store_v6
            code = "16si" if v6 else "4si"
        elif field.kind.startswith("bytes:"):
            # Only BODY's length prefix is part of the fixed head; the body itself and the
            # two variable parts after it are appended by the encoder.
            if field.name != "body":
                continue
            code = field.kind.removeprefix("bytes:")
        else:
            code = field.kind
        codes.append(code)
        position += struct.calcsize(">" + code)
    head = struct.Struct("".join(codes))
    assert head.size == position
    topic_length = struct.Struct(">H" if v2 else ">B")
    host_sysflag = (SysFlag.BORN_HOST_V6 if born_v6 else 0) | (
        SysFlag.STORE_HOST_V6 if store_v6 else 0)
    return RecordLayout(born_v6=born_v6, store_v6=store_v6, v2=v2, head=head, offsets=offsets,
                        topic_length=topic_length, properties_length=struct.Struct(">H"),
                        magic=MAGIC_V2 if v2 else MAGIC_V1, host_sysflag=int(host_sysflag),
                        store_timestamp_offset=offsets["store_timestamp_ms"])


LAYOUTS: dict[tuple[bool, bool, bool], RecordLayout] = {
    (born_v6, store_v6, v2): _build_layout(born_v6=born_v6, store_v6=store_v6, v2=v2)
    for born_v6 in (False, True) for store_v6 in (False, True) for v2 in (False, True)
}
_V4 = LAYOUTS[False, False, False]
assert _V4.head.size == 88, "v1 IPv4 head through BODYLEN is 88 bytes (the body starts @88)"
assert _V4.offsets["store_timestamp_ms"] == 56
assert _V4.offsets["queue_offset"] == 20
assert _V4.offsets["physical_offset"] == 28
assert _V4.record_size(body_bytes=0, topic_bytes=0, properties_bytes=0) == 91
assert LAYOUTS[True, True, True].record_size(body_bytes=0, topic_bytes=0,
                                             properties_bytes=0) == 91 + 12 + 12 + 1
_FIXED_MIN_BYTES = _V4.record_size(body_bytes=0, topic_bytes=0, properties_bytes=0)
"""The smallest TOTALSIZE a message can have (empty body, topic and properties)."""

QUEUE_AND_PHYSICAL_OFFSET = struct.Struct(">qq")
"""QUEUEOFFSET and PHYSICALOFFSET are adjacent (@20, @28): stamped with one pack_into."""
TIMESTAMP = struct.Struct(">q")
assert _V4.offsets["physical_offset"] - _V4.offsets["queue_offset"] == 8


_BORN_HOST_V6 = int(SysFlag.BORN_HOST_V6)
_STORE_HOST_V6 = int(SysFlag.STORE_HOST_V6)
"""Plain ints for the read path: an IntFlag `&` costs a Python-level enum call."""


def layout_for(*, sysflag: int, magic: int) -> RecordLayout:
    return LAYOUTS[sysflag & _BORN_HOST_V6 != 0, sysflag & _STORE_HOST_V6 != 0,
                   magic == MAGIC_V2]


def body_crc(body: ReadableBuffer) -> int:
    """RocketMQ's BODYCRC: CRC-32 (zlib's polynomial, as `java.util.zip.CRC32`), sign bit off."""
    return zlib.crc32(body) & 0x7FFFFFFF


class RecordHead(NamedTuple):
    """Every fixed field of a record, decoded; hosts as (packed address, port).

    A NamedTuple: recovery, dispatch and reads decode one per record, and a tuple is built
    in C where a frozen dataclass sets each field through `object.__setattr__`."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sysflag: int
    born_timestamp_ms: int
    born_host: tuple[bytes, int]
    store_timestamp_ms: int
    store_host: tuple[bytes, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body_size_bytes: int


def encode_record(*, layout: RecordLayout, queue_id: int, flag: int, sysflag: int,
                  born_timestamp_ms: int, born_host: tuple[bytes, int],
                  store_host: tuple[bytes, int], body: bytes, topic: bytes,
                  properties: bytes) -> bytes:
    """The reference encoder: every field by name, in `RECORD_FIELDS` order, with
    QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP left 0 (the put path stamps them).

    The put path's encoder (`encoder.MessageEncoder`) packs the same head inline for speed;
    a test holds the two to identical bytes."""
    total_size = layout.record_size(body_bytes=len(body), topic_bytes=len(topic),
                                    properties_bytes=len(properties))
    head = layout.head.pack(
        total_size, layout.magic, body_crc(body), queue_id, flag, 0, 0,
        sysflag | layout.host_sysflag, born_timestamp_ms, born_host[0], born_host[1], 0,
        store_host[0], store_host[1], 0, 0, len(body))
    encoded = b"".join((head, body, layout.topic_tail(topic), layout.properties_tail(properties)))
    assert len(encoded) == total_size
    return encoded


def stamp_record(buffer: WritableBuffer, position: int, *,
                 store_timestamp_offset: int, queue_offset: int, physical_offset: int,
                 store_timestamp_ms: int) -> None:
    """Write the three fields the put path owns into an already-copied record."""
    QUEUE_AND_PHYSICAL_OFFSET.pack_into(buffer, position + 20, queue_offset, physical_offset)
    TIMESTAMP.pack_into(buffer, position + store_timestamp_offset, store_timestamp_ms)


def decode_head(buffer: ReadableBuffer, position: int) -> tuple[RecordLayout, RecordHead]:
    """Decode the fixed part of the record at `position` (magic must be v1 or v2)."""
    total_size, magic = _SIZE_AND_MAGIC.unpack_from(buffer, position)
    sysflag = int.from_bytes(buffer[position + 36:position + 40], "big", signed=True)
    layout = layout_for(sysflag=sysflag, magic=magic)
    (total_size, magic, crc, queue_id, flag, queue_offset, physical_offset, sysflag, born_ts,
     born_ip, born_port, store_ts, store_ip, store_port, reconsume_times, prepared_offset,
     body_size) = layout.head.unpack_from(buffer, position)
    head = RecordHead(total_size, magic, crc, queue_id, flag, queue_offset, physical_offset,
                      sysflag, born_ts, (born_ip, born_port), store_ts, (store_ip, store_port),
                      reconsume_times, prepared_offset, body_size)
    return layout, head


def decode_variable(buffer: ReadableBuffer, position: int, layout: RecordLayout,
                    head: RecordHead) -> tuple[memoryview, bytes, bytes]:
    """Return (body view, topic bytes, properties bytes) of a record whose head is decoded.

    The body is a view into `buffer` (no copy); the caller copies it if it must outlive it.
    """
    view = memoryview(buffer)
    body_start = position + layout.body_offset
    body = view[body_start:body_start + head.body_size_bytes]
    cursor = body_start + head.body_size_bytes
    (topic_size,) = layout.topic_length.unpack_from(buffer, cursor)
    cursor += layout.topic_length.size
    topic = bytes(view[cursor:cursor + topic_size])
    cursor += topic_size
    (properties_size,) = layout.properties_length.unpack_from(buffer, cursor)
    cursor += layout.properties_length.size
    properties = bytes(view[cursor:cursor + properties_size])
    return body, topic, properties


def topic_and_properties(buffer: ReadableBuffer, position: int, layout: RecordLayout,
                         head: RecordHead) -> tuple[bytes, bytes]:
    """The topic and properties bytes of a record `check_record` found valid, copied out
    with plain slices (no views): what dispatch needs, read once."""
    cursor = position + layout.body_offset + head.body_size_bytes
    (topic_size,) = layout.topic_length.unpack_from(buffer, cursor)
    cursor += layout.topic_length.size
    topic = bytes(buffer[cursor:cursor + topic_size])
    cursor += topic_size + layout.properties_length.size
    return topic, bytes(buffer[cursor:position + head.total_size])


class RecordCheck(enum.Enum):
    """What `check_record` found at a position."""

    OK = "ok"
    BLANK = "blank"
    END = "end"
    """TOTALSIZE and MAGIC are zero: the never-written tail of a segment."""
    CORRUPT = "corrupt"


@dataclasses.dataclass(frozen=True, slots=True)
class CheckResult:
    status: RecordCheck
    size_bytes: int
    reason: str = ""
    head: RecordHead | None = None
    layout: RecordLayout | None = None


def check_record_reference(buffer: ReadableBuffer, position: int, *, limit: int,
                           expected_physical_offset: int, verify_crc: bool) -> CheckResult:
    """Validate the record at `position` of a segment whose valid bytes end at `limit`.

    Checks magic, that TOTALSIZE fits and equals the size recomputed from the lengths, that
    PHYSICALOFFSET names this very position, and (if asked) the body CRC.  The reference:
    `check_record`, below, is its C twin unless MQSTORE_NO_EXTENSIONS=1 (compiled.py).
    """
    if limit - position < BLANK_SIZE_BYTES:
        return CheckResult(RecordCheck.END, 0) if not any(buffer[position:limit]) else \
            CheckResult(RecordCheck.CORRUPT, 0, "fewer than 8 bytes left and not zero")
    total_size, magic = _SIZE_AND_MAGIC.unpack_from(buffer, position)
    if magic == MAGIC_BLANK:
        if total_size != limit - position:
            return CheckResult(RecordCheck.CORRUPT, 0, f"BLANK of {total_size} bytes does not "
                               f"reach the segment end ({limit - position} bytes left)")
        return CheckResult(RecordCheck.BLANK, total_size)
    if magic not in (MAGIC_V1, MAGIC_V2):
        if total_size == 0 and magic == 0:
            return CheckResult(RecordCheck.END, 0)
        return CheckResult(RecordCheck.CORRUPT, 0, f"bad magic 0x{magic & 0xFFFFFFFF:08X}")
    return _check_message(buffer, position, total_size=total_size, limit=limit,
                          expected_physical_offset=expected_physical_offset,
                          verify_crc=verify_crc)


def holds_entry(buffer: ReadableBuffer, position: int, *, limit: int, physical_offset: int,
                size_bytes: int, queue_id: int, queue_offset: int) -> bool:
    """Whether a consume queue entry describes the record at `position` of `buffer` (whose
    valid bytes end at `limit`): a whole message starts there, at `physical_offset`, of
    `size_bytes`, in queue `queue_id` at `queue_offset`.  The one check every reader of a
    queue another process writes makes of the entry that may be half-written."""
    check = check_record(buffer, position, limit=limit,
                         expected_physical_offset=physical_offset, verify_crc=False)
    head = check.head
    return (check.status is RecordCheck.OK and head is not None
            and head.total_size == size_bytes and head.queue_id == queue_id
            and head.queue_offset == queue_offset)


def _check_message(buffer: ReadableBuffer, position: int, *, total_size: int, limit: int,
                   expected_physical_offset: int, verify_crc: bool) -> CheckResult:
    if not _FIXED_MIN_BYTES <= total_size <= limit - position:
        return CheckResult(RecordCheck.CORRUPT, 0, f"TOTALSIZE {total_size} outside "
                           f"[{_FIXED_MIN_BYTES}, {limit - position}]")
    layout, head = decode_head(buffer, position)
    problem = _structure_problem(buffer, position, layout, head, expected_physical_offset)
    if problem is None and verify_crc:
        start = position + layout.body_offset
        with memoryview(buffer) as view, view[start:start + head.body_size_bytes] as body:
            crc = body_crc(body)
        if crc != head.body_crc:
            problem = f"body CRC 0x{crc:08X} != stored 0x{head.body_crc:08X}"
    if problem is not None:
        return CheckResult(RecordCheck.CORRUPT, total_size, problem)
    return CheckResult(RecordCheck.OK, total_size, head=head, layout=layout)


def _structure_problem(buffer: ReadableBuffer, position: int, layout: RecordLayout,
                       head: RecordHead, expected_physical_offset: int) -> str | None:
    """What is wrong with the record's lengths and position, or None."""
    if head.physical_offset != expected_physical_offset:
        return (f"PHYSICALOFFSET field says {head.physical_offset}, record is at "
                f"{expected_physical_offset}")
    end = position + head.total_size
    cursor = position + layout.body_offset + head.body_size_bytes
    if head.body_size_bytes < 0 or cursor + layout.topic_length.size > end:
        return f"BODYLEN {head.body_size_bytes} overruns TOTALSIZE {head.total_size}"
    (topic_size,) = layout.topic_length.unpack_from(buffer, cursor)
    cursor += layout.topic_length.size + topic_size
    if cursor + layout.properties_length.size > end:
        return f"TOPICLEN {topic_size} overruns TOTALSIZE {head.total_size}"
    (properties_size,) = layout.properties_length.unpack_from(buffer, cursor)
    recomputed = layout.record_size(body_bytes=head.body_size_bytes, topic_bytes=topic_size,
                                    properties_bytes=properties_size)
    if recomputed != head.total_size:
        return f"TOTALSIZE {head.total_size} but the lengths add up to {recomputed}"
    return None


def write_blank(buffer: WritableBuffer, position: int, size_bytes: int) -> None:
    """Write the BLANK end-of-segment record covering `size_bytes` (≥ 8)."""
    assert size_bytes >= BLANK_SIZE_BYTES
    _BLANK.pack_into(buffer, position, size_bytes, MAGIC_BLANK)


def compiled_check_record() -> Callable[..., CheckResult]:
    """`check_record_reference` in C (storage/format/_records.c), told every layout's field
    offsets and the types it returns; ImportError if the extension is not built."""
    fields = RECORD_FIELDS[:len(RecordHead._fields)]
    kinds = "".join({"host": "h", "bytes:i": "i"}.get(field.kind, field.kind)
                    for field in fields)
    layouts = tuple(
        (layout, tuple(layout.offsets[field.name] for field in fields),
         16 if born_v6 else 4, 16 if store_v6 else 4, layout.head.size,
         layout.topic_length.size, layout.properties_length.size)
        for (born_v6, store_v6, _), layout in sorted(LAYOUTS.items()))
    return cast("Callable[..., CheckResult]", compiled.extension().bind_check_record(
        check_record_reference, RecordHead, CheckResult,
        tuple(field.name for field in dataclasses.fields(CheckResult)),
        (RecordCheck.OK, RecordCheck.BLANK, RecordCheck.END, RecordCheck.CORRUPT), layouts,
        kinds, (MAGIC_V1, MAGIC_V2, MAGIC_BLANK), (BLANK_SIZE_BYTES, _FIXED_MIN_BYTES),
        (_BORN_HOST_V6, _STORE_HOST_V6)))


check_record = compiled.pick(check_record_reference, compiled_check_record)
"""Validate the record at `position` (see `check_record_reference`): the C twin, or the
reference itself when MQSTORE_NO_EXTENSIONS=1."""
