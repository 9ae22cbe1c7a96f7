"""The C twins (storage/format/_records.c) against their Python references: same inputs,
identical results -- or the identical exception.

These tests need the extension built (scripts/setup.sh): they bind the C twins themselves,
so they compare C with Python even when MQSTORE_NO_EXTENSIONS=1 makes the store run the
references, and fail at collection, loudly, when the extension is missing.
"""

from __future__ import annotations

import array
import mmap
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.storage.config import StoreConfig
from mqstore.storage.format import compiled, record
from mqstore.storage.format import encoder as encoder_module
from mqstore.storage.format.java_hash import java_string_hash_reference
from mqstore.storage.format.message import Message, PutResult
from mqstore.storage.format.properties import decode_properties_reference, encode_properties
from tests.storage.format.buffer_kinds import BUFFER_KINDS, as_buffer

c_check_record = record.compiled_check_record()
c_java_string_hash = compiled.compiled_twin(java_string_hash_reference)
c_decode_properties = compiled.compiled_twin(decode_properties_reference)

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


def _outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[object, ...]:
    """What a call did: its result, or the type and text of what it raised."""
    try:
        return ("returned", function(*args, **kwargs))
    except Exception as error:  # any exception is an outcome to compare
        return ("raised", type(error), str(error))


def _check_outcome(result: object) -> object:
    """A CheckResult as comparable fields (the layout by identity, the head by type too)."""
    if not isinstance(result, record.CheckResult):
        return result
    return (result.status, result.size_bytes, result.reason, type(result.head), result.head,
            id(result.layout))


def assert_same_check(buffer: object, *args: Any, **kwargs: Any) -> None:
    c = _outcome(c_check_record, buffer, *args, **kwargs)
    reference = _outcome(record.check_record_reference, buffer, *args, **kwargs)
    assert tuple(map(_check_outcome, c)) == tuple(map(_check_outcome, reference))


def test_the_extension_is_built_from_the_current_source() -> None:
    """An edit of storage/format/_records.c needs a rebuild (scripts/setup.sh) before these
    tests mean anything: the loaded .so must be newer than the source it was built from."""
    source = Path(__file__).parents[3] / "storage" / "format" / "_records.c"
    built = Path(compiled.extension().__file__ or "").resolve()
    assert built.stat().st_mtime >= source.stat().st_mtime, (
        f"{built} is older than {source}: run scripts/setup.sh")


# ---------------------------------------------------------------- java_string_hash

@given(st.text())
def test_hash_of_any_text(text: str) -> None:
    assert c_java_string_hash(text) == java_string_hash_reference(text)


@given(st.text(st.characters(min_codepoint=0x80, exclude_categories=("Cs",))))
def test_hash_of_non_ascii_and_non_bmp_text(text: str) -> None:
    assert c_java_string_hash(text) == java_string_hash_reference(text)


@pytest.mark.parametrize("text", ["", "polygenelubricants", "é" * 40, "😀", "a😀é\u0100",
                                  "\U0010ffff", "\ud800", "ok\udfff", "\ud83d\ude00",
                                  "😀\udc00"])
def test_hash_edge_texts(text: str) -> None:
    assert _outcome(c_java_string_hash, text) == _outcome(java_string_hash_reference, text)


class _Text(str):
    __slots__ = ()


@pytest.mark.parametrize("value", [b"TagA", 7, None, _Text("TagA")])
def test_hash_of_other_types_behaves_as_the_reference(value: object) -> None:
    assert _outcome(c_java_string_hash, value) == _outcome(java_string_hash_reference, value)


# ---------------------------------------------------------------- check_record

HOST = st.tuples(st.binary(min_size=4, max_size=4), INT32)
HOST_V6 = st.tuples(st.binary(min_size=16, max_size=16), INT32)
BODIES = st.one_of(st.binary(max_size=40), st.binary(min_size=200, max_size=1100))


@st.composite
def records(draw: st.DrawFn) -> bytes:
    """A record `record.encode_record` wrote for a random layout and fields, stamped."""
    born_v6, store_v6, v2 = draw(st.tuples(st.booleans(), st.booleans(), st.booleans()))
    layout = record.LAYOUTS[born_v6, store_v6, v2]
    topic = draw(st.binary(min_size=0, max_size=300 if v2 else 127))
    encoded = bytearray(record.encode_record(
        layout=layout, queue_id=draw(INT32), flag=draw(INT32),
        sysflag=draw(st.integers(0, (1 << 31) - 1)) & ~0x30, born_timestamp_ms=draw(INT64),
        born_host=draw(HOST_V6 if born_v6 else HOST),
        store_host=draw(HOST_V6 if store_v6 else HOST), body=draw(BODIES), topic=topic,
        properties=draw(st.binary(max_size=120))))
    record.stamp_record(encoded, 0, store_timestamp_offset=layout.store_timestamp_offset,
                        queue_offset=draw(INT64), physical_offset=draw(INT64),
                        store_timestamp_ms=draw(INT64))
    return bytes(encoded)


@st.composite
def segments(draw: st.DrawFn) -> tuple[bytes, int, int, int]:
    """(segment bytes, record position, limit, expected physical offset): a valid record
    in a segment, then maybe corrupted (bytes flipped, zeroed, a BLANK written over it,
    the limit cut short, the expected offset wrong)."""
    encoded = draw(records())
    prefix = draw(st.binary(max_size=16))
    tail = draw(st.one_of(st.binary(max_size=24), st.just(bytes(16))))
    data = bytearray(prefix + encoded + tail)
    position = len(prefix)
    physical_offset = int.from_bytes(encoded[28:36], "big", signed=True)
    limit = len(prefix) + len(encoded) + draw(st.integers(0, len(tail)))
    layout, head = record.decode_head(encoded, 0)
    lengths = (layout.body_offset - 4, layout.body_offset + head.body_size_bytes,
               len(encoded) - 2 - len(record.decode_variable(encoded, 0, layout, head)[2]))
    for corruption in draw(st.lists(st.sampled_from(
            ["flip", "variable", "length", "zeros", "blank", "limit", "offset", "short",
             "size"]), max_size=3)):
        index = draw(st.integers(0, len(data) - 1))
        if corruption == "flip":
            data[index] = draw(st.integers(0, 255))
        elif corruption == "variable":  # body, topic or properties, or their lengths
            index = position + draw(st.integers(layout.body_offset - 4, len(encoded) - 1))
            data[index] = draw(st.integers(0, 255))
        elif corruption == "length":
            index = position + draw(st.sampled_from(lengths))
            data[index:index + 2] = draw(st.binary(min_size=2, max_size=2))
        elif corruption == "zeros":
            end = min(len(data), index + draw(st.integers(1, 64)))
            data[index:end] = bytes(end - index)
        elif corruption == "blank":
            size = draw(st.one_of(st.just(limit - position), st.integers(8, (1 << 31) - 1)))
            record.write_blank(data, position, max(size, 8))
        elif corruption == "limit":
            limit = draw(st.integers(position, len(data)))
        elif corruption == "offset":
            physical_offset = draw(INT64)
        elif corruption == "short":
            limit = position + draw(st.integers(0, 7))
        else:
            data[position:position + 4] = draw(INT32).to_bytes(4, "big", signed=True)
    return bytes(data), position, min(limit, len(data)), physical_offset


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(segments(), st.sampled_from(BUFFER_KINDS), st.booleans())
def test_check_record_on_random_segments(segment: tuple[bytes, int, int, int], kind: str,
                                         verify_crc: bool) -> None:
    data, position, limit, physical_offset = segment
    with as_buffer(data, kind) as buffer:
        assert_same_check(buffer, position, limit=limit,
                          expected_physical_offset=physical_offset, verify_crc=verify_crc)


@settings(max_examples=200)
@given(records(), st.sampled_from(BUFFER_KINDS), st.booleans())
def test_valid_records_are_ok_in_both(encoded: bytes, kind: str, verify_crc: bool) -> None:
    physical_offset = int.from_bytes(encoded[28:36], "big", signed=True)
    with as_buffer(encoded, kind) as buffer:
        c = c_check_record(buffer, 0, limit=len(encoded),
                           expected_physical_offset=physical_offset, verify_crc=verify_crc)
        assert_same_check(buffer, 0, limit=len(encoded),
                          expected_physical_offset=physical_offset, verify_crc=verify_crc)
    assert c.status is record.RecordCheck.OK, c.reason
    assert type(c.head) is record.RecordHead
    assert c.layout in record.LAYOUTS.values()


@settings(max_examples=200)
@given(st.binary(max_size=200), st.integers(-10, 210), st.integers(-10, 260), INT64,
       st.sampled_from(BUFFER_KINDS))
def test_check_record_on_random_bytes_and_bounds(data: bytes, position: int, limit: int,
                                                 physical_offset: int, kind: str) -> None:
    with as_buffer(data, kind) as buffer:
        assert_same_check(buffer, position, limit=limit,
                          expected_physical_offset=physical_offset, verify_crc=True)


def _valid_record() -> bytes:
    layout = record.LAYOUTS[True, True, False]
    return record.encode_record(layout=layout, queue_id=1, flag=0, sysflag=0,
                                born_timestamp_ms=5, born_host=(bytes(16), 1),
                                store_host=(bytes(16), 2), body=b"body", topic=b"T",
                                properties=b"")


class _Int(int):
    pass


@pytest.mark.parametrize(("position", "options"), [
    (0, {"limit": True}),
    (_Int(0), {}),
    (0, {"limit": 1 << 70}),
    (0, {"expected_physical_offset": 1 << 70}),
    (0, {"expected_physical_offset": 0.0}),
    (0, {"verify_crc": 1}),
    (0, {"verify_crc": None}),
    (0, {"limit": -1}),
    (-100, {}),
    (1 << 70, {}),
    (0, {"extra": 1}),
])
def test_unusual_arguments_behave_as_the_reference(position: int,
                                                   options: dict[str, object]) -> None:
    encoded = _valid_record()
    arguments: dict[str, object] = {"limit": len(encoded), "expected_physical_offset": 0,
                                    "verify_crc": True} | options
    for kind in BUFFER_KINDS:
        with as_buffer(encoded, kind) as buffer:
            assert_same_check(buffer, position, **arguments)


def test_unusual_calls_behave_as_the_reference() -> None:
    encoded = _valid_record()
    options = {"limit": len(encoded), "expected_physical_offset": 0, "verify_crc": False}
    assert_same_check(encoded, position=0, **options)
    assert_same_check(encoded, 0, len(encoded), 0, False)
    assert_same_check(encoded, **options)
    assert_same_check(encoded, 0, limit=len(encoded), expected_physical_offset=0)


def test_a_record_cut_at_the_buffer_end_raises_as_the_reference() -> None:
    """TOTALSIZE fits the limit but the v6 head runs past the buffer: struct.error in both."""
    encoded = bytearray(_valid_record())
    cut = bytes(encoded[:100])
    for kind in BUFFER_KINDS:
        with as_buffer(cut, kind) as buffer:
            assert_same_check(buffer, 0, limit=100, expected_physical_offset=0,
                              verify_crc=False)


@pytest.mark.parametrize("make", [
    lambda data: array.array("B", data),
    lambda data: memoryview(data).cast("c"),
    lambda data: memoryview(data)[::2],
    lambda data: memoryview(data[:96]).cast("I"),
    lambda data: memoryview(data[:96]).cast("B", (8, 12)),
    lambda data: "not a buffer",
    lambda data: None,
])
def test_other_buffer_types_behave_as_the_reference(make: Callable[[bytes], object]) -> None:
    buffer = make(_valid_record())
    assert_same_check(buffer, 0, limit=24, expected_physical_offset=0, verify_crc=False)
    assert_same_check(buffer, 0, limit=90, expected_physical_offset=0, verify_crc=True)


def test_released_and_closed_buffers_raise_as_the_reference() -> None:
    view = memoryview(_valid_record())
    view.release()
    assert_same_check(view, 0, limit=10, expected_physical_offset=0, verify_crc=False)
    mapping = mmap.mmap(-1, 200)
    mapping.close()
    assert_same_check(mapping, 0, limit=10, expected_physical_offset=0, verify_crc=False)


@pytest.mark.parametrize("stored_crc", [0, 5, -5, -0x12345678, 0x7FFFFFFF, -(1 << 31)])
def test_crc_mismatch_reasons_match(stored_crc: int) -> None:
    """The reason prints both CRCs as Python's `08X` does, a negative stored one too."""
    encoded = bytearray(_valid_record())
    encoded[8:12] = stored_crc.to_bytes(4, "big", signed=True)
    for kind in BUFFER_KINDS:
        with as_buffer(bytes(encoded), kind) as buffer:
            assert_same_check(buffer, 0, limit=len(encoded), expected_physical_offset=0,
                              verify_crc=True)


def test_holds_entry_runs_the_selected_checker() -> None:
    encoded = _valid_record()
    assert record.holds_entry(encoded, 0, limit=len(encoded), physical_offset=0,
                              size_bytes=len(encoded), queue_id=1, queue_offset=0)


# ---------------------------------------------------------------- decode_properties

PIECES = st.sampled_from([b"\x01", b"\x02", b"a", b"KEYS", b" ", b"\xc3\xa9", b"\xe2\x82",
                          b"\xe2\x82\xac", b"\xff", b"\x80", b"\xed\xa0\x80", b"\xf0\x9f",
                          b"\xf0\x9f\x98\x80", b"\xc0\x81", b"\x00"])
PROPERTY_BYTES = st.one_of(st.binary(max_size=80), st.lists(PIECES, max_size=30).map(b"".join))
NAMES = st.text(st.characters(exclude_characters="\x01\x02", exclude_categories=("Cs",)),
                min_size=1, max_size=12)


@settings(max_examples=300)
@given(PROPERTY_BYTES, st.sampled_from(["bytes", "bytearray", "memoryview"]))
def test_decode_properties_of_any_bytes(encoded: bytes, kind: str) -> None:
    with as_buffer(encoded, kind) as buffer:
        c = c_decode_properties(buffer)
        assert c == decode_properties_reference(buffer)
    assert list(c) == list(decode_properties_reference(encoded))


@given(st.dictionaries(NAMES, NAMES, max_size=8), st.booleans())
def test_decode_properties_of_well_formed_properties(properties: dict[str, str],
                                                     trailing_separator: bool) -> None:
    encoded = encode_properties(properties)
    if not trailing_separator:
        encoded = encoded.removesuffix(b"\x02")
    assert c_decode_properties(encoded) == decode_properties_reference(encoded) == properties


class _Bytes(bytes):
    pass


@pytest.mark.parametrize("value", [
    "TAGS\x01a", "", None, 5, _Bytes(b"TAGS\x01a\x02"), memoryview(b"TAGS\x01ab\x02")[::2],
    memoryview(b"TAGS\x01abc\x02"[:8]).cast("H"), array.array("B", b"K\x01v"),
])
def test_decode_properties_of_other_types_behaves_as_the_reference(value: object) -> None:
    assert _outcome(c_decode_properties, value) == _outcome(decode_properties_reference, value)


# ---------------------------------------------- the put path: prepare, write_record, pack_batch

c_write_record, c_pack_batch = encoder_module.compiled_record_writers()
STORE_HOSTS = ("127.0.0.1:10911", "[::1]:10911")
ENCODERS = {host: encoder_module.MessageEncoder(StoreConfig.for_small_segments(
    1 << 20, store_host=host, topic_size_bytes_max=255)) for host in STORE_HOSTS}
TOPIC_TEXT = st.text("abcXYZ019_-%|", min_size=1, max_size=200)
KEY_TEXT = st.text("abk019", min_size=1, max_size=6)
WRITE_KINDS = ("mmap", "bytearray")


@st.composite
def messages(draw: st.DrawFn) -> Message:
    """A message every encoder accepts: any layout, with or without properties."""
    return Message(draw(TOPIC_TEXT), draw(st.integers(0, (1 << 31) - 1)), draw(BODIES),
                   tags=draw(st.none() | KEY_TEXT), keys=draw(st.lists(KEY_TEXT, max_size=2)),
                   flag=draw(st.integers(-2, 8) | INT32),
                   born_host=draw(st.sampled_from([None, "10.0.0.1:5555", "[fe80::1]:4000"])),
                   born_timestamp_ms=draw(st.none() | INT64),
                   sysflag=draw(st.sampled_from([0, 0x1, 0x2, 0x40, 0x80, 0x8])),
                   reconsume_times=draw(st.integers(0, (1 << 31) - 1)))


@st.composite
def prepared_records(draw: st.DrawFn) -> encoder_module.PreparedRecord:
    encoder = ENCODERS[draw(st.sampled_from(STORE_HOSTS))]
    return encoder.prepare_reference(draw(messages()))


def _put_fields(outcome: tuple[object, ...]) -> tuple[object, ...]:
    """A call's outcome with its PutResults (one, a list, or in a (bytes, list) pair) as
    their fields, the type of each too."""
    def fields(value: object) -> object:
        if isinstance(value, PutResult):
            return tuple((type(getattr(value, name)), getattr(value, name))
                         for name in encoder_module.PUT_RESULT_SLOTS)
        if isinstance(value, list):
            return [fields(item) for item in value]
        if isinstance(value, tuple):
            return tuple(fields(item) for item in value)
        return value
    return tuple(fields(item) for item in outcome)


@contextmanager
def writable(size_bytes: int, kind: str) -> Iterator[mmap.mmap | bytearray]:
    """A buffer to write into, filled with a pattern (a byte left unwritten shows)."""
    pattern = bytes(range(7, 256)) * (size_bytes // 249 + 1)
    if kind == "bytearray":
        yield bytearray(pattern[:size_bytes])
        return
    mapping = mmap.mmap(-1, size_bytes)
    mapping[:] = pattern[:size_bytes]
    try:
        yield mapping
    finally:
        mapping.close()


def assert_same_write(size_bytes: int, kind: str, *args: Any, **kwargs: Any) -> None:
    """write_record and its reference, each into a fresh buffer: the same outcome and bytes."""
    seen = []
    for write in (c_write_record, encoder_module.write_record_reference):
        with writable(size_bytes, kind) as target:
            seen.append((_put_fields(_outcome(write, target, *args, **kwargs)), bytes(target)))
    assert seen[0] == seen[1]


@settings(max_examples=300)
@given(prepared_records(), st.integers(0, 40), INT64, INT64, INT64, st.sampled_from(WRITE_KINDS))
def test_write_record_writes_the_references_bytes(prepared: encoder_module.PreparedRecord,
                                                  position: int, queue_offset: int,
                                                  physical_offset: int, store_time_ms: int,
                                                  kind: str) -> None:
    size = prepared[1]
    arguments = (position, prepared, queue_offset, physical_offset, store_time_ms, b"host")
    assert_same_write(position + size + 9, kind, *arguments)
    with writable(position + size, kind) as target:
        result = c_write_record(target, *arguments)
        written = bytes(target[position:position + size])
    assert (result.physical_offset, result.queue_offset, result.size_bytes) == (
        physical_offset, queue_offset, size)
    layout, head = record.decode_head(written, 0)
    assert (layout, head.total_size, head.queue_offset, head.store_timestamp_ms) == (
        prepared[0], size, queue_offset, store_time_ms)


@settings(max_examples=200)
@given(st.lists(st.tuples(prepared_records(), INT64), max_size=6), INT64, INT64)
def test_pack_batch_packs_the_references_bytes(records: list[tuple[Any, int]],
                                               physical_offset: int, store_time_ms: int) -> None:
    prepared = [item[0] for item in records]
    offsets = [item[1] for item in records]
    arguments = (prepared, offsets, physical_offset, store_time_ms, b"host")
    c = _put_fields(_outcome(c_pack_batch, *arguments))
    assert c == _put_fields(_outcome(encoder_module.pack_batch_reference, *arguments))
    if c[0] == "returned":  # each record as write_record writes it alone
        packed, position = c[1][0], 0
        for record_prepared, queue_offset in records:
            size = record_prepared[1]
            with writable(size, "bytearray") as target:
                c_write_record(target, 0, record_prepared, queue_offset,
                               physical_offset + position, store_time_ms, b"host")
                assert packed[position:position + size] == target
            position += size
        assert position == len(packed)


def _valid_prepared() -> encoder_module.PreparedRecord:
    return ENCODERS["[::1]:10911"].prepare_reference(
        Message("T", 3, b"body", tags="a", born_host="10.0.0.1:1", born_timestamp_ms=5))


def _replaced(prepared: tuple[Any, ...], index: int, value: object) -> tuple[Any, ...]:
    return (*prepared[:index], value, *prepared[index + 1:])


ODD_ITEMS = [
    (0, record.LAYOUTS[False, False, False]), (0, None), (1, True), (1, 1 << 40), (1, -1),
    (1, _Int(5)), (2, 1 << 31), (2, -(1 << 31) - 1), (2, 1.0), (3, None), (4, -(1 << 31)),
    (5, -7), (5, -(1 << 70)), (5, 1 << 63), (5, 1.5), (5, None), (6, (bytes(4), 1)),
    (6, [bytes(4), 1]), (6, (bytes(3), 1)), (6, (bytes(4), 1 << 31)), (6, (bytes(4),)),
    (7, bytearray(b"body")), (7, b"bodies"), (8, memoryview(b"\x01T\x00\x00")), (8, b""),
    (9, (bytes(4), 7)), (9, (bytes(16), -1)), (10, 1 << 31), (10, False), (11, -1),
    (11, None),
]


@pytest.mark.parametrize(("index", "value"), ODD_ITEMS)
@pytest.mark.parametrize("kind", WRITE_KINDS)
def test_odd_prepared_records_are_written_as_the_reference(index: int, value: object,
                                                           kind: str) -> None:
    """Values no encoder makes (wrong types, out of range, sizes that do not add up):
    written as the reference writes them, or the reference's exception."""
    prepared = _replaced(_valid_prepared(), index, value)
    size = _valid_prepared()[1]
    assert_same_write(size + 16, kind, 3, prepared, 1, 2, 3, b"host")
    for arguments in ([prepared, [4]], [[prepared], [4]]):
        records = arguments[0] if isinstance(arguments[0], list) else [arguments[0]]
        assert _put_fields(_outcome(c_pack_batch, records, [4], 0, 1, b"h")) == _put_fields(
            _outcome(encoder_module.pack_batch_reference, records, [4], 0, 1, b"h"))


@pytest.mark.parametrize(("position", "offsets"), [
    (-1, (1, 2, 3)), (_Int(0), (1, 2, 3)), (1 << 70, (1, 2, 3)), (200, (1, 2, 3)),
    (0, (1 << 63, 2, 3)), (0, (1, -(1 << 63) - 1, 3)), (0, (1, 2, 1.0)), (0, (True, 2, 3)),
])
@pytest.mark.parametrize("kind", WRITE_KINDS)
def test_odd_write_arguments_behave_as_the_reference(position: int, offsets: tuple[Any, ...],
                                                     kind: str) -> None:
    size = _valid_prepared()[1]
    assert_same_write(size + 16, kind, position, _valid_prepared(), *offsets, b"host")


def test_odd_write_calls_and_targets_behave_as_the_reference() -> None:
    prepared = _valid_prepared()
    size = prepared[1]
    assert_same_write(size - 1, "mmap", 0, prepared, 1, 2, 3, b"host")  # does not fit
    assert_same_write(size, "bytearray", 1, prepared, 1, 2, 3, b"host")
    assert_same_write(size, "mmap", 0, prepared, 1, 2, 3)  # an argument short
    assert_same_write(size, "mmap", 0, prepared, 1, 2, 3, b"host", 4)
    assert_same_write(size, "mmap", 0, prepared, 1, 2, 3, store_host_packed=b"host")
    closed = mmap.mmap(-1, size)
    closed.close()
    read_only = mmap.mmap(-1, size, prot=mmap.PROT_READ)
    targets: list[object] = [closed, read_only, bytes(size), memoryview(bytearray(size)),
                             array.array("B", bytes(size)), None]
    for target in targets:
        assert _put_fields(_outcome(c_write_record, target, 0, prepared, 1, 2, 3, b"h")) == \
            _put_fields(_outcome(encoder_module.write_record_reference, target, 0, prepared,
                                 1, 2, 3, b"h"))
    read_only.close()


@pytest.mark.parametrize("arguments", [
    ([], [], 0, 0, b"h"), ((), (), 0, 0, b"h"), ([None], [0], 0, 0, b"h"),
    ([_valid_prepared()], [], 0, 0, b"h"), ([_valid_prepared()], [0, 1], 0, 0, b"h"),
    ([_valid_prepared()], (0,), 0, 0, b"h"), ([_valid_prepared()] * 2, [0, 1], 1.0, 0, b"h"),
    ([_valid_prepared()] * 2, [0, 1], (1 << 63) - 100, 0, b"h"),
    ([_valid_prepared()] * 2, [0, 1], 0, 1 << 63, b"h"), ([_valid_prepared()], [0], 0, 0),
])
def test_odd_pack_batch_calls_behave_as_the_reference(arguments: tuple[Any, ...]) -> None:
    assert _put_fields(_outcome(c_pack_batch, *arguments)) == _put_fields(
        _outcome(encoder_module.pack_batch_reference, *arguments))
    assert _put_fields(_outcome(c_pack_batch, *arguments[:4], store_host_packed=b"h")) == \
        _put_fields(_outcome(encoder_module.pack_batch_reference, *arguments[:4],
                             store_host_packed=b"h"))


class _Message(Message):
    __slots__ = ()


ODD_MESSAGE_FIELDS: dict[str, st.SearchStrategy[object]] = {
    "topic": st.sampled_from(["T", "Bench", "x" * 128, "x" * 300, "bad topic", "", 7, None,
                              "%RETRY%T", "Tópico"]),
    "queue_id": st.sampled_from([0, 3, -1, (1 << 31) - 1, 1 << 31, True, 1.0, None, _Int(2)]),
    "body": st.sampled_from([b"", b"abc", bytearray(b"ab"), memoryview(b"mv"), "text", None,
                             b"x" * ((1 << 18) + 1), b"x" * (1 << 18)]),
    "flag": st.sampled_from([0, 5, -(1 << 31), 1 << 31, None, 0.0, False, True, 2.5, _Int(1)]),
    "born_timestamp_ms": st.sampled_from([None, 0, -5, 1 << 62, 1 << 63, -(1 << 70), 1.5]),
    "sysflag": st.sampled_from([0, 1, 0x10, 0x8, -1, False, None, 1 << 31, _Int(0)]),
    "reconsume_times": st.sampled_from([0, 3, -1, None, False, _Int(0)]),
    "properties": st.sampled_from([None, None, {}, {"a": "b"}]),
    "tags": st.sampled_from([None, None, "TagA", ""]),
    "keys": st.sampled_from([(), (), [], ("k",), "k", None, ("",)]),
    "born_host": st.sampled_from([None, None, "10.0.0.1:1", "[::1]:2", "bad"]),
    "properties_encoded": st.sampled_from([None, None, b"", b"a\x01b\x02"]),
}


@settings(max_examples=500)
@given(st.fixed_dictionaries(ODD_MESSAGE_FIELDS), st.sampled_from(STORE_HOSTS),
       st.sampled_from([Message, _Message]), st.booleans())
def test_prepare_answers_as_the_reference(fields: dict[str, object], store_host: str,
                                          message_type: type[Message], cached: bool) -> None:
    """Any message, valid or not, the topic cached or not yet: the C prepare returns the
    reference's record, item for item (types too), or raises its exception."""
    message = message_type.__new__(message_type)
    for name, value in fields.items():
        setattr(message, name, value)
    encoder = encoder_module.MessageEncoder(StoreConfig.for_small_segments(
        1 << 20, store_host=store_host, topic_size_bytes_max=255))
    c_prepare = encoder._compiled_prepare()
    if cached:
        _outcome(encoder.prepare_reference, message)

    def typed(outcome: tuple[object, ...]) -> tuple[object, ...]:
        if outcome[0] != "returned":
            return outcome
        assert isinstance(outcome[1], tuple)
        return tuple((type(item), item) for item in outcome[1])

    first = typed(_outcome(c_prepare, message))
    assert first == typed(_outcome(encoder.prepare_reference, message))
    assert typed(_outcome(c_prepare, message)) == first  # now cached, if it was valid


def test_prepare_of_a_message_with_unset_fields_behaves_as_the_reference() -> None:
    encoder = ENCODERS["127.0.0.1:10911"]
    message = Message.__new__(Message)
    assert _outcome(encoder._compiled_prepare(), message) == _outcome(
        encoder.prepare_reference, message)
    assert _outcome(encoder._compiled_prepare(), None) == _outcome(
        encoder.prepare_reference, None)


def test_the_put_path_twins_answer_the_stores_calls_themselves() -> None:
    """The equivalence above would hold for a twin that handed every call on: bound to
    counting references, the C functions must answer what the store passes without them
    (and hand on only the odd call)."""
    handed: list[str] = []

    def write_reference(*arguments: Any) -> object:
        handed.append("write")
        return encoder_module.write_record_reference(*arguments)

    def pack_reference(*arguments: Any) -> object:
        handed.append("pack")
        return encoder_module.pack_batch_reference(*arguments)

    def prepare_reference(message: Message) -> object:
        handed.append("prepare")
        return encoder.prepare_reference(message)

    write, pack = encoder_module.compiled_record_writers(write_reference, pack_reference)
    encoder = ENCODERS["127.0.0.1:10911"]
    prepare = compiled.extension().bind_prepare(
        prepare_reference, Message, encoder_module.MESSAGE_SLOTS, encoder._common,
        encoder._body_size_max, encoder.store_host)
    message = Message("Answered", 1, b"body")
    encoder.prepare_reference(message)  # the topic cached, as after a store's first put
    prepared = prepare(message)
    with writable(prepared[1], "mmap") as target:
        write(target, 0, prepared, 0, 0, 1, b"h")
    pack([prepared, prepared], [0, 1], 0, 1, b"h")
    pack([encoder.prepare_reference(Message("Other", 0, b"x", tags="a", born_host="[::1]:1",
                                            born_timestamp_ms=9, flag=-1))], [3], 7, 1, b"h")
    assert handed == []
    prepare(Message("Answered", 1, b"body", tags="a"))
    assert _outcome(pack, [prepared], [0, 1], 0, 1, b"h")[0] == "raised"  # zip(strict=True)
    with writable(prepared[1], "mmap") as target:
        assert _outcome(write, target, 1, prepared, 0, 0, 1, b"h")[0] == "raised"  # no room
    assert handed == ["prepare", "pack", "write"]


def test_the_put_path_picks_by_the_environment() -> None:
    """MQSTORE_NO_EXTENSIONS=1: the store's put path runs the Python references only."""
    code = ("from mqstore.storage.config import StoreConfig\n"
            "from mqstore.storage.format import encoder as e\n"
            "m = e.MessageEncoder(StoreConfig())\n"
            "print(e.write_record is e.write_record_reference,"
            " e.pack_batch is e.pack_batch_reference,"
            " m.prepare == m.prepare_reference)\n")
    for setting, expected in (("1", "True True True"), ("0", "False False False")):
        environment = {**os.environ, "MQSTORE_NO_EXTENSIONS": setting}
        run = subprocess.run([sys.executable, "-c", code], env=environment,
                             capture_output=True, text=True, timeout=60, check=False)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == expected.split()
