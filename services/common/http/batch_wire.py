"""The binary batch formats of `POST /v1/batch`, shared by the writer and the client.

JSON costs more to encode and parse than storing does (a 1 KiB body as base64 is 1.4 KiB of
text, and 100,000 results/s of JSON is most of a core), so throughput clients send batches
in `application/x-mqstore-batch` and may ask for results in
`application/x-mqstore-batch-result`.  Both are big-endian; each has one class below whose
docstring is its layout and whose `struct.Struct`s are that layout's only definition.
Parsing is strict: every length is checked against the bytes that remain, trailing bytes
are an error, and the error names the message index and the byte offset.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from mqstore.storage.format.message import offset_msg_id as msg_id

__all__ = ["BATCH_MEDIA_TYPE", "RESULT_MEDIA_TYPE", "STATUS_NAMES", "BatchCodec", "ResultCodec",
           "ResultRow", "WireFormatError", "WireMessage", "msg_id"]

BATCH_MEDIA_TYPE = "application/x-mqstore-batch"
RESULT_MEDIA_TYPE = "application/x-mqstore-batch-result"

STATUS_NAMES = ("PUT_OK", "FLUSH_DISK_TIMEOUT", "MESSAGE_ILLEGAL", "SERVICE_NOT_AVAILABLE",
                "OS_PAGECACHE_BUSY", "CREATE_MAPPED_FILE_FAILED", "FLUSH_SLAVE_TIMEOUT",
                "SLAVE_NOT_AVAILABLE", "TOPIC_NOT_EXIST", "NO_PERMISSION")
"""Result status codes: the index in this tuple is the byte on the wire (the store's
`PutStatus` names; the writer asserts at import that they are all here), then the writer's
topic refusals (services/writer/topic_gate.py), which only forward answers carry."""
STATUS_CODES = {name: code for code, name in enumerate(STATUS_NAMES)}

QUEUE_ID_ANY = -1
"""On the wire, "the writer chooses the queue" (None in `WireMessage`)."""
_U16_MAX = 0xFFFF
_U32_MAX = 0xFFFFFFFF
_I32_MAX = 0x7FFFFFFF


class WireFormatError(ValueError):
    """A batch or result body that does not follow its layout; the message says where."""


class WireMessage(NamedTuple):
    """One message of a batch, as the client builds it and the writer decodes it."""

    topic: str
    body: bytes
    queue_id: int | None = None
    tags: str | None = None
    keys: tuple[str, ...] = ()
    properties: Mapping[str, str] | None = None


ResultFields = tuple[str, int, int, int, int]
"""status, queue_id, queue_offset, physical_offset, store_timestamp_ms."""


class ResultRow(NamedTuple):
    """One stored message's outcome."""

    status: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    store_timestamp_ms: int


class BatchCodec:
    """`application/x-mqstore-batch`: many messages, possibly of several topics.

    Header, 10 bytes:

        offset  size  field
        0       4     magic          b"MQSB"
        4       2     version        u16 = 1
        6       4     count          u32, messages that follow (1..batch_messages_max)

    Then `count` entries, each a 15-byte head and its variable parts in head order:

        offset  size  field
        0       4     queue_id       i32; -1 = the writer chooses (round robin)
        4       1     topic length   u8, 1..255
        5       2     tags length    u16; 0 = no tags
        7       2     key count      u16
        9       2     property count u16
        11      4     body length    u32
        15      ...   topic          ASCII
                      tags           UTF-8
                      keys           per key: u16 length + UTF-8
                      properties     per property: u16 + UTF-8 name, u16 + UTF-8 value
                      body           bytes

    All lengths lead the entry so that a message without keys or properties (the common
    one) is read with one unpack and two slices.
    """

    MAGIC = b"MQSB"
    VERSION = 1
    HEADER = struct.Struct(">4sHI")
    ENTRY = struct.Struct(">iBHHHI")
    LENGTH = struct.Struct(">H")
    assert HEADER.size == 10
    assert ENTRY.size == 15

    @classmethod
    def encode(cls, messages: Iterable[WireMessage]) -> bytes:
        """Encode `messages`; ValueError for a field that does not fit its width."""
        parts: list[bytes] = [b""]
        count = 0
        entry_pack, length_pack = cls.ENTRY.pack, cls.LENGTH.pack
        for message in messages:
            topic = message.topic.encode("ascii")
            tags = message.tags.encode("utf-8") if message.tags else b""
            body = bytes(message.body)
            queue_id = QUEUE_ID_ANY if message.queue_id is None else message.queue_id
            properties = message.properties or {}
            _check_widths(count, topic=topic, tags=tags, body=body, queue_id=queue_id,
                          keys=message.keys, properties=properties)
            parts += (entry_pack(queue_id, len(topic), len(tags), len(message.keys),
                                 len(properties), len(body)), topic, tags)
            for key in message.keys:
                _append_text(parts, key, length_pack)
            for name, value in properties.items():
                _append_text(parts, name, length_pack)
                _append_text(parts, value, length_pack)
            parts.append(body)
            count += 1
        if not 0 < count <= _U32_MAX:
            raise ValueError(f"a batch holds 1..{_U32_MAX} messages, not {count}")
        parts[0] = cls.HEADER.pack(cls.MAGIC, cls.VERSION, count)
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes, *, messages_max: int) -> list[WireMessage]:
        """Decode a whole batch body or raise `WireFormatError` saying where it breaks."""
        end = len(data)
        if end < cls.HEADER.size:
            raise WireFormatError(f"batch is {end} bytes, shorter than its "
                                  f"{cls.HEADER.size}-byte header")
        magic, version, count = cls.HEADER.unpack_from(data, 0)
        if magic != cls.MAGIC:
            raise WireFormatError(f"batch magic is {magic!r}, expected {cls.MAGIC!r}")
        if version != cls.VERSION:
            raise WireFormatError(f"batch version {version} is not supported (only "
                                  f"{cls.VERSION})")
        if not 0 < count <= messages_max:
            raise WireFormatError(f"batch count {count} must be in 1..{messages_max} "
                                  f"(batch_messages_max)")
        if count * cls.ENTRY.size > end - cls.HEADER.size:
            raise WireFormatError(f"batch claims {count} messages but has only "
                                  f"{end - cls.HEADER.size} bytes after its header")
        messages: list[WireMessage] = []
        topics: dict[bytes, str] = {}
        offset = cls.HEADER.size
        for index in range(count):
            message, offset = cls._decode_entry(data, offset, index, topics)
            messages.append(message)
        if offset != end:
            raise WireFormatError(f"{end - offset} trailing bytes after the {count} messages "
                                  f"the header announced (at byte {offset})")
        return messages

    @classmethod
    def _decode_entry(cls, data: bytes, offset: int, index: int,
                      topics: dict[bytes, str]) -> tuple[WireMessage, int]:
        end = len(data)
        if offset + cls.ENTRY.size > end:
            raise WireFormatError(f"message {index} at byte {offset}: its "
                                  f"{cls.ENTRY.size}-byte head runs past the end ({end})")
        queue_id, topic_size, tags_size, key_count, property_count, body_size = \
            cls.ENTRY.unpack_from(data, offset)
        start = offset
        offset += cls.ENTRY.size
        stop = offset + topic_size + tags_size
        if stop > end:
            raise WireFormatError(f"message {index} at byte {start}: topic and tags "
                                  f"({topic_size} + {tags_size} bytes) run past the end ({end})")
        topic_bytes = data[offset:offset + topic_size]
        topic = topics.get(topic_bytes)
        if topic is None:
            topic = topics[topic_bytes] = _text(topic_bytes, "ascii", index, "topic")
        tags = (_text(data[offset + topic_size:stop], "utf-8", index, "tags")
                if tags_size else None)
        offset = stop
        keys: tuple[str, ...] = ()
        properties: dict[str, str] | None = None
        if key_count or property_count:
            keys, properties, offset = cls._decode_texts(data, offset, index, key_count,
                                                         property_count)
        stop = offset + body_size
        if stop > end:
            raise WireFormatError(f"message {index} at byte {start}: body of {body_size} "
                                  f"bytes runs past the end ({end - offset} bytes left)")
        message = WireMessage(topic, data[offset:stop],
                              None if queue_id == QUEUE_ID_ANY else queue_id, tags, keys,
                              properties)
        return message, stop

    @classmethod
    def _decode_texts(cls, data: bytes, offset: int, index: int, key_count: int,
                      property_count: int) -> tuple[tuple[str, ...], dict[str, str] | None, int]:
        texts: list[str] = []
        for _ in range(key_count + 2 * property_count):
            if offset + 2 > len(data):
                raise WireFormatError(f"message {index}: a key or property length at byte "
                                      f"{offset} runs past the end ({len(data)})")
            (size,) = cls.LENGTH.unpack_from(data, offset)
            offset += 2
            if offset + size > len(data):
                raise WireFormatError(f"message {index}: a key or property of {size} bytes "
                                      f"at byte {offset} runs past the end ({len(data)})")
            texts.append(_text(data[offset:offset + size], "utf-8", index, "key or property"))
            offset += size
        pairs = texts[key_count:]
        properties = dict(zip(pairs[0::2], pairs[1::2], strict=True)) if pairs else None
        if properties is not None and len(properties) != property_count:
            raise WireFormatError(f"message {index}: a property name appears twice")
        return tuple(texts[:key_count]), properties, offset


class ResultCodec:
    """`application/x-mqstore-batch-result`: one row per message of the batch, in order.

    Header, 11 bytes + the store host:

        offset  size  field
        0       4     magic              b"MQSR"
        4       2     version            u16 = 1
        6       4     count              u32, rows that follow
        10      1     store host length  u8: 8 (IPv4 + port) or 20 (IPv6 + port)
        11      n     store host         address + i32 port, as in the record's STOREHOST

    Then `count` rows of 29 bytes:

        offset  size  field
        0       1     status             u8, index into `STATUS_NAMES`
        1       4     queue_id           i32
        5       8     queue_offset       i64
        13      8     physical_offset    i64
        21      8     store_timestamp_ms i64

    The msg id is the hex of store host + physical offset (8 bytes), as for JSON results.
    """

    MAGIC = b"MQSR"
    VERSION = 1
    HEADER = struct.Struct(">4sHIB")
    ROW = struct.Struct(">Biqqq")
    assert HEADER.size == 11
    assert ROW.size == 29

    @classmethod
    def encode(cls, rows: Sequence[ResultFields], *, store_host_packed: bytes) -> bytes:
        """`rows` are `ResultRow`s or plain tuples in its field order (cheaper to build)."""
        assert len(store_host_packed) in (8, 20), store_host_packed
        row_pack = cls.ROW.pack
        codes = STATUS_CODES
        parts = [cls.HEADER.pack(cls.MAGIC, cls.VERSION, len(rows), len(store_host_packed)),
                 store_host_packed]
        parts += [row_pack(codes[row[0]], row[1], row[2], row[3], row[4]) for row in rows]
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> tuple[bytes, list[ResultRow]]:
        """(store host packed, rows) or `WireFormatError`."""
        host, fields = cls.decode_fields(data)
        return host, [ResultRow._make(row) for row in fields]

    @classmethod
    def decode_fields(cls, data: bytes) -> tuple[bytes, list[ResultFields]]:
        """`decode` with plain tuples for rows (a NamedTuple per row costs the client
        more than the rest of reading the answer)."""
        if len(data) < cls.HEADER.size:
            raise WireFormatError(f"result is {len(data)} bytes, shorter than its header")
        magic, version, count, host_size = cls.HEADER.unpack_from(data, 0)
        if magic != cls.MAGIC or version != cls.VERSION:
            raise WireFormatError(f"result magic/version {magic!r}/{version} is not "
                                  f"{cls.MAGIC!r}/{cls.VERSION}")
        if host_size not in (8, 20):
            raise WireFormatError(f"store host length {host_size} is neither 8 nor 20")
        start = cls.HEADER.size + host_size
        if len(data) != start + count * cls.ROW.size:
            raise WireFormatError(f"result of {count} rows must be {start + count * cls.ROW.size}"
                                  f" bytes, not {len(data)}")
        names = STATUS_NAMES
        try:
            rows = [(names[status], queue_id, queue_offset, physical_offset, timestamp_ms)
                    for status, queue_id, queue_offset, physical_offset, timestamp_ms
                    in cls.ROW.iter_unpack(data[start:])]
        except IndexError:
            raise WireFormatError(f"a row has an unknown status code (known: 0.."
                                  f"{len(names) - 1})") from None
        return data[cls.HEADER.size:start], rows


def _text(raw: bytes, encoding: str, index: int, what: str) -> str:
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as error:
        raise WireFormatError(f"message {index}: {what} is not {encoding.upper()}: "
                              f"{error.reason} at byte {error.start}") from None


def _append_text(parts: list[bytes], text: str, length_pack: Callable[..., bytes]) -> None:
    raw = text.encode("utf-8")
    if len(raw) > _U16_MAX:
        raise ValueError(f"{text[:20]!r}... is {len(raw)} bytes; a key or property holds at "
                         f"most {_U16_MAX}")
    parts += (length_pack(len(raw)), raw)


def _check_widths(index: int, *, topic: bytes, tags: bytes, body: bytes, queue_id: int,
                  keys: Sequence[str], properties: Mapping[str, str]) -> None:
    if not 0 < len(topic) <= 0xFF:
        raise ValueError(f"message {index}: topic must be 1..255 bytes, not {len(topic)}")
    if len(tags) > _U16_MAX or len(keys) > _U16_MAX or len(properties) > _U16_MAX:
        raise ValueError(f"message {index}: tags, key count or property count over {_U16_MAX}")
    if len(body) > _U32_MAX:
        raise ValueError(f"message {index}: body over {_U32_MAX} bytes")
    if not QUEUE_ID_ANY <= queue_id <= _I32_MAX:
        raise ValueError(f"message {index}: queue_id {queue_id} out of [0, {_I32_MAX}]")
    if isinstance(keys, str):
        raise ValueError(f"message {index}: keys must be a sequence of strings, not a string")
