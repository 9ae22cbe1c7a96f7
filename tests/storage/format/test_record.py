"""The record codec against its layout (docs/on-disk-format.md): every layout round-trips,
offsets match the table."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore, StoreConfig
from mqstore.storage.config import parse_host
from mqstore.storage.format import record
from mqstore.storage.format.message import decode_stored
from mqstore.storage.format.properties import encode_properties
from mqstore.storage.format.record import LAYOUTS, RecordCheck, check_record, encode_record
from mqstore.storage.format.volume import COMMITLOG_DIRECTORY

V4_HOST = (bytes([10, 0, 0, 1]), 5555)
V6_HOST = (bytes(15) + b"\x01", 10911)


def _encode(*, born_v6: bool, store_v6: bool, topic: bytes, body: bytes = b"hello",
            properties: bytes = b"TAGS\x01a\x02") -> tuple[record.RecordLayout, bytes]:
    layout = LAYOUTS[born_v6, store_v6, len(topic) > 127]
    sysflag = (record.SysFlag.BORN_HOST_V6 if born_v6 else 0) | (
        record.SysFlag.STORE_HOST_V6 if store_v6 else 0)
    encoded = encode_record(layout=layout, queue_id=3, flag=7, sysflag=sysflag,
                            born_timestamp_ms=1_700_000_000_000,
                            born_host=V6_HOST if born_v6 else V4_HOST,
                            store_host=V6_HOST if store_v6 else V4_HOST, body=body, topic=topic,
                            properties=properties)
    return layout, encoded


@pytest.mark.parametrize("born_v6", [False, True])
@pytest.mark.parametrize("store_v6", [False, True])
@pytest.mark.parametrize("topic_length", [1, 127, 128, 255])
def test_every_layout_round_trips(born_v6: bool, store_v6: bool, topic_length: int) -> None:
    topic = b"T" * topic_length
    layout, encoded = _encode(born_v6=born_v6, store_v6=store_v6, topic=topic)
    buffer = bytearray(encoded)
    record.stamp_record(buffer, 0, store_timestamp_offset=layout.offsets["store_timestamp_ms"],
                        queue_offset=42, physical_offset=0, store_timestamp_ms=1234)
    expected = 91 + 5 + topic_length + len(b"TAGS\x01a\x02") + 12 * born_v6 + 12 * store_v6 \
        + (topic_length > 127)
    assert len(buffer) == expected
    result = check_record(buffer, 0, limit=len(buffer), expected_physical_offset=0,
                          verify_crc=True)
    assert result.status is RecordCheck.OK, result.reason
    stored = decode_stored(buffer, 0)
    assert stored.total_size == expected
    assert stored.magic == (record.MAGIC_V2 if topic_length > 127 else record.MAGIC_V1)
    assert stored.topic == topic.decode()
    assert stored.queue_id == 3
    assert stored.flag == 7
    assert stored.queue_offset == 42
    assert stored.store_timestamp_ms == 1234
    assert stored.reconsume_times == 0
    assert stored.sysflag == layout.host_sysflag
    assert stored.body == b"hello"
    assert stored.tags == "a"
    assert stored.born_host == ("[::1]:10911" if born_v6 else "10.0.0.1:5555")
    assert stored.store_host == ("[::1]:10911" if store_v6 else "10.0.0.1:5555")


def test_v1_ipv4_field_offsets_match_the_spec_table() -> None:
    _layout, encoded = _encode(born_v6=False, store_v6=False, topic=b"TopicTest", body=b"B" * 10)
    buffer = bytearray(encoded)
    record.stamp_record(buffer, 0, store_timestamp_offset=56, queue_offset=5,
                        physical_offset=4096, store_timestamp_ms=99)
    assert struct.unpack_from(">i", buffer, 0)[0] == len(buffer)
    assert struct.unpack_from(">I", buffer, 4)[0] == 0xDAA320A7
    assert struct.unpack_from(">i", buffer, 8)[0] == zlib.crc32(b"B" * 10) & 0x7FFFFFFF
    assert struct.unpack_from(">i", buffer, 12)[0] == 3
    assert struct.unpack_from(">q", buffer, 20)[0] == 5
    assert struct.unpack_from(">q", buffer, 28)[0] == 4096
    assert struct.unpack_from(">q", buffer, 40)[0] == 1_700_000_000_000
    assert buffer[48:52] == bytes([10, 0, 0, 1])
    assert struct.unpack_from(">i", buffer, 52)[0] == 5555
    assert struct.unpack_from(">q", buffer, 56)[0] == 99
    assert struct.unpack_from(">i", buffer, 84)[0] == 10
    assert buffer[88:98] == b"B" * 10
    assert buffer[98] == len(b"TopicTest")
    assert buffer[99:108] == b"TopicTest"
    assert struct.unpack_from(">h", buffer, 108)[0] == len(b"TAGS\x01a\x02")


def test_v2_topic_length_is_a_short() -> None:
    layout, encoded = _encode(born_v6=False, store_v6=False, topic=b"x" * 200, body=b"")
    assert layout.v2
    assert struct.unpack_from(">I", encoded, 4)[0] == 0xDAA320AB
    assert struct.unpack_from(">H", encoded, 88)[0] == 200


def test_blank_record_is_size_and_magic() -> None:
    buffer = bytearray(64)
    record.write_blank(buffer, 16, 48)
    assert struct.unpack_from(">iI", buffer, 16) == (48, 0xCBD43194)
    result = check_record(buffer, 16, limit=64, expected_physical_offset=16, verify_crc=True)
    assert result.status is RecordCheck.BLANK
    assert result.size_bytes == 48


@pytest.mark.parametrize("damage", ["crc", "magic", "size", "position", "topic_length"])
def test_damaged_records_are_corrupt(damage: str) -> None:
    _, encoded = _encode(born_v6=False, store_v6=False, topic=b"T", body=b"0123456789")
    buffer = bytearray(encoded) + bytes(64)
    expected_position = 0
    if damage == "crc":
        buffer[90] ^= 0xFF
    elif damage == "magic":
        buffer[5] ^= 0x01
    elif damage == "size":
        struct.pack_into(">i", buffer, 0, len(encoded) + 3)
    elif damage == "position":
        expected_position = 4096
    else:
        buffer[98] = 50
    result = check_record(buffer, 0, limit=len(buffer),
                          expected_physical_offset=expected_position, verify_crc=True)
    assert result.status is RecordCheck.CORRUPT
    assert result.reason


def test_zeros_are_the_end_of_data() -> None:
    result = check_record(bytes(128), 0, limit=128, expected_physical_offset=0, verify_crc=True)
    assert result.status is RecordCheck.END


def test_layout_table_is_the_single_source() -> None:
    for (born_v6, store_v6, v2), layout in LAYOUTS.items():
        assert layout.head.size == 88 + 12 * born_v6 + 12 * store_v6
        assert layout.offsets["store_timestamp_ms"] == 56 + 12 * born_v6
        assert layout.topic_length.size == (2 if v2 else 1)
        assert [field.name for field in record.RECORD_FIELDS][:2] == ["total_size", "magic"]


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("born_host", [None, "10.0.0.1:5555", "[::1]:10911"])
def test_put_path_writes_the_reference_record_in_place(tmp_path: Path, batch: bool,
                                                       born_host: str | None) -> None:
    """`put` and `put_batch` write the head straight into the segment (no temporary record):
    every byte must equal the reference encoder's record with the put's stamps."""
    config = StoreConfig.for_small_segments(1 << 20, store_host="[::1]:10911",
                                            topic_size_bytes_max=255)
    messages = [Message(topic, 7, b"payload-%d" % index, tags=tags, keys=keys, flag=-3,
                        born_host=born_host, born_timestamp_ms=born_ms)
                for index, (topic, tags, keys, born_ms) in enumerate([
                    ("T", None, (), None), ("x" * 200, "a", ("k",), 1_700_000_000_123),
                    ("T", "b", (), None)])]
    with MessageStore.open(tmp_path / "store", config) as store:
        results = (store.put_batch(messages) if batch
                   else [store.put(message) for message in messages])
    raw = (tmp_path / "store" / COMMITLOG_DIRECTORY / f"{0:020d}").read_bytes()
    position = 0
    for message, result in zip(messages, results, strict=True):
        born = parse_host(born_host, setting="b") if born_host else (V6_HOST[0], 10911)
        layout = LAYOUTS[len(born[0]) == 16, True, len(message.topic) > 127]
        properties = {**({"TAGS": message.tags} if message.tags else {}),
                      **({"KEYS": " ".join(message.keys)} if message.keys else {})}
        written = raw[position:position + result.size_bytes]
        born_at = layout.offsets["born_timestamp_ms"]
        born_ms = int.from_bytes(written[born_at:born_at + 8], "big")
        # No born time given: the put's clock reading, never after the store time.
        assert born_ms == (message.born_timestamp_ms or born_ms) <= result.store_timestamp_ms
        expected = bytearray(encode_record(
            layout=layout, queue_id=7, flag=-3, sysflag=0, born_timestamp_ms=born_ms,
            born_host=born, store_host=(V6_HOST[0], 10911), body=message.body,
            topic=message.topic.encode(),
            properties=encode_properties(properties) if properties else b""))
        record.stamp_record(expected, 0,
                            store_timestamp_offset=layout.store_timestamp_offset,
                            queue_offset=result.queue_offset,
                            physical_offset=result.physical_offset,
                            store_timestamp_ms=result.store_timestamp_ms)
        assert written == expected
        position += result.size_bytes
