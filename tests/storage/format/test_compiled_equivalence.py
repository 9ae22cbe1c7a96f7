"""The C twins (storage/format/_records.c) against their Python references: same inputs,
identical results -- or the identical exception.

These tests need the extension built (scripts/setup.sh): they bind the C twins themselves,
so they compare C with Python even when MQSTORE_NO_EXTENSIONS=1 makes the store run the
references, and fail at collection, loudly, when the extension is missing.
"""

from __future__ import annotations

import array
import mmap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.storage.format import compiled, record
from mqstore.storage.format.java_hash import java_string_hash_reference
from mqstore.storage.format.properties import decode_properties_reference, encode_properties

c_check_record = record.compiled_check_record()
c_java_string_hash = compiled.compiled_twin(java_string_hash_reference)
c_decode_properties = compiled.compiled_twin(decode_properties_reference)

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
BUFFER_KINDS = ("bytes", "bytearray", "memoryview", "mmap")


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


@contextmanager
def as_buffer(data: bytes, kind: str) -> Iterator[object]:
    """`data` as one of the buffer types the store reads records from."""
    if kind == "mmap":
        mapping = mmap.mmap(-1, max(len(data), 1))
        mapping[:len(data)] = data
        try:
            yield mapping
        finally:
            mapping.close()
    elif kind == "memoryview":
        with memoryview(bytearray(data)) as view:
            yield view
    else:
        yield bytes(data) if kind == "bytes" else bytearray(data)


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
