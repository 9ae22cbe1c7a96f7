"""A REGISTER_BROKER (103) body as topic configs: RocketMQ's `RegisterBrokerBody`.

Plain (the default, `compressed` absent or false): JSON,

    {"topicConfigSerializeWrapper": {"topicConfigTable": {name: TopicConfig, ...},
                                     "dataVersion": {"counter","timestamp","stateVersion"}},
     "filterServerList": []}

where a TopicConfig is `{"topicName","readQueueNums","writeQueueNums","perm",
"topicFilterType","topicSysFlag","order","attributes"}`.

Compressed (a broker with `compressedRegister=true`; see `decode` for the flag): a zlib
stream of big-endian length-prefixed parts, as `RegisterBrokerBody.encode(true)` writes:

    i32 n, n bytes     dataVersion JSON
    i32 count          topic configs that follow
    count times:       i32 n, n bytes of `TopicConfig.encode()`: "name read write perm
                       filterType [attributesJSON]", fields separated by one space
    i32 n, n bytes     filterServerList JSON
    i32 count, count times i32 n + n bytes: static-topic mappings (read past, unused)

The inflated stream is bounded by `inflated_bytes_max` (the frame bound: a compressed body
holds no more than a plain one could), and a body that breaks the layout raises
`RegistrationError`.  `bodyCrc32`, when not 0, must be the CRC-32 of the body as sent
(its low 31 bits, as RocketMQ's `UtilAll.crc32` computes it).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping

import orjson

from mqstore.services.namesrv.route_table import QueueData

_INT32 = struct.Struct(">i")
ZLIB_FIRST_BYTE = b"\x78"
"""A zlib stream's CMF byte with a 32 KiB window (Java's `Deflater`, any level)."""
PERM_DEFAULT = 6
"""PERM_READ | PERM_WRITE: what a TopicConfig without `perm` means."""


class RegistrationError(ValueError):
    """A registration body that breaks its layout; the message says where."""


class TopicConfigs:
    """A registration's topics and data version."""

    def __init__(self, topics: dict[str, QueueData], data_version: dict[str, object]) -> None:
        self.topics = topics
        self.data_version = data_version


CRC32_MASK = 0x7FFFFFFF
"""RocketMQ's `UtilAll.crc32` keeps the low 31 bits of the CRC-32 (a positive int)."""


def check_crc32(body: bytes, crc32_text: str | None) -> None:
    """RocketMQ's `checksum`: a `bodyCrc32` of 0 or none means unchecked; else it must be
    `UtilAll.crc32(body)`, the CRC-32's low 31 bits."""
    if not crc32_text or crc32_text == "0":
        return
    try:
        expected = int(crc32_text)
    except ValueError:
        raise RegistrationError(f"bodyCrc32 {crc32_text[:20]!r} is not a number") from None
    if zlib.crc32(body) & CRC32_MASK != expected:
        raise RegistrationError("crc32 not match")


def decode(body: bytes, *, compressed: bool, inflated_bytes_max: int) -> TopicConfigs:
    """`compressed`: the header's flag.  A body that starts as a zlib stream does (0x78, never
    the `{` of JSON) is read as compressed whatever the flag says: RocketMQ 5.5.0's broker
    always sends `compressed=false`, also when `compressedRegister=true` deflates the body
    (its own name server then refuses the registration)."""
    if not body:
        return TopicConfigs({}, {})
    if compressed or body[:1] == ZLIB_FIRST_BYTE:
        return _decode_compressed(_inflate(body, inflated_bytes_max))
    document = _json(body, "the registration body")
    wrapper = document.get("topicConfigSerializeWrapper") or {}
    if not isinstance(wrapper, dict):
        raise RegistrationError("topicConfigSerializeWrapper is not an object")
    table = wrapper.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        raise RegistrationError("topicConfigTable is not an object")
    topics = {str(name): _queue_data(config, str(name)) for name, config in table.items()}
    return TopicConfigs(topics, _data_version(wrapper.get("dataVersion")))


def decode_data_version(body: bytes) -> dict[str, object]:
    """QUERY_DATA_VERSION's body: a `DataVersion` JSON ({} when empty)."""
    return _data_version(_json(body, "the data version")) if body else {}


def _json(data: bytes, what: str) -> dict[str, object]:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            raise RegistrationError(f"{what} is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise RegistrationError(f"{what} is not a JSON object")
    return document


def _data_version(value: object) -> dict[str, object]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RegistrationError("dataVersion is not an object")
    return {key: value[key] for key in ("counter", "timestamp", "stateVersion") if key in value}


def _queue_data(config: object, name: str) -> QueueData:
    if not isinstance(config, dict):
        raise RegistrationError(f"the topic config of {name!r} is not an object")
    try:
        return QueueData(read_queue_nums=_count(config.get("readQueueNums", 16)),
                         write_queue_nums=_count(config.get("writeQueueNums", 16)),
                         perm=int(config.get("perm", PERM_DEFAULT)),
                         topic_sys_flag=int(config.get("topicSysFlag", 0)))
    except (TypeError, ValueError) as error:
        raise RegistrationError(f"the topic config of {name!r}: {error}") from None


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"a queue count must be an integer, not {value!r:.40}")
    count = int(value)
    if not 0 <= count <= 1 << 16:
        raise ValueError(f"a queue count of {count} is outside 0..65536")
    return count


def _inflate(body: bytes, inflated_bytes_max: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(body, inflated_bytes_max)
    except zlib.error as error:
        raise RegistrationError(f"the compressed body does not inflate: {error}") from None
    if inflater.unconsumed_tail:
        raise RegistrationError(f"the compressed body inflates past {inflated_bytes_max} "
                                f"bytes (namesrv frame_size_bytes_max)")
    return data


def _decode_compressed(data: bytes) -> TopicConfigs:
    reader = _Parts(data)
    data_version = _data_version(_json(reader.part("the data version"), "the data version"))
    count = reader.int32("the topic count")
    if count < 0:
        raise RegistrationError(f"the topic count {count} is negative")
    topics: dict[str, QueueData] = {}
    for _ in range(count):
        text = reader.part("a topic config").decode("utf-8", "replace")
        name, queue_data = _encoded_topic(text)
        topics[name] = queue_data
    return TopicConfigs(topics, data_version)


def _encoded_topic(text: str) -> tuple[str, QueueData]:
    """`TopicConfig.decode`: "name read write perm filterType [attributes]"."""
    fields = text.split(" ", 5)
    if len(fields) < 5:
        raise RegistrationError(f"topic config {text[:80]!r} has fewer than 5 fields")
    try:
        return fields[0], QueueData(read_queue_nums=_count(fields[1]),
                                    write_queue_nums=_count(fields[2]), perm=int(fields[3]))
    except ValueError as error:
        raise RegistrationError(f"topic config {text[:80]!r}: {error}") from None


class _Parts:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def int32(self, what: str) -> int:
        if self._position + _INT32.size > len(self._data):
            raise RegistrationError(f"the compressed body ends before {what}")
        (value,) = _INT32.unpack_from(self._data, self._position)
        self._position += _INT32.size
        return int(value)

    def part(self, what: str) -> bytes:
        length = self.int32(f"the length of {what}")
        if length < 0 or self._position + length > len(self._data):
            raise RegistrationError(f"{what} of {length} bytes runs past the body's end")
        self._position += length
        return self._data[self._position - length:self._position]


def encode_compressed(topics: Mapping[str, QueueData], data_version: Mapping[str, object]
                      ) -> bytes:
    """The compressed form, as a broker writes it (for tests and fuzzers)."""
    def part(data: bytes) -> bytes:
        return _INT32.pack(len(data)) + data

    parts = [part(json.dumps(dict(data_version)).encode()), _INT32.pack(len(topics))]
    parts += [part(f"{name} {queue_data.read_queue_nums} {queue_data.write_queue_nums} "
                   f"{queue_data.perm} SINGLE_TAG {{}}".encode())
              for name, queue_data in topics.items()]
    parts += [part(b"[]"), _INT32.pack(0)]
    return zlib.compress(b"".join(parts), 9)
