"""The data source's C record walk (storage/format/_walk.c) against its Python references
(pipeline/walk.py, pipeline/decode.py, pipeline/record_columns.py): same inputs, identical
results -- or the identical exception.

These tests need the extension built (scripts/setup.sh): they call the C twins' wrappers
themselves, so they compare C with Python even when MQSTORE_NO_EXTENSIONS=1 makes the data
source run the references.
"""

from __future__ import annotations

import dataclasses
import mmap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.pipeline import compiled_walk, decode, record_columns, walk
from mqstore.storage import StoredMessage
from mqstore.storage.format import record

from .conftest import SEGMENT_BYTES

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
BUFFER_KINDS = ("bytes", "bytearray", "memoryview", "mmap")
HOST = st.tuples(st.binary(min_size=4, max_size=4), INT32)
HOST_V6 = st.tuples(st.binary(min_size=16, max_size=16), INT32)
BODIES = st.one_of(st.binary(max_size=40), st.binary(min_size=200, max_size=1100))
# Bytes Python's UTF-8 decoder replaces: a lone continuation, a truncated sequence, overlong
# forms, a surrogate, above U+10FFFF, bytes never used.
BAD_UTF8 = st.sampled_from([b"\x80", b"\xc3", b"\xe2\x82", b"\xc0\xaf", b"\xe0\x80\xaf",
                            b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf0\x8f\xbf\xbf",
                            b"\xff", b"\xfe"])
TEXT = st.text(st.sampled_from("ab é€😀\x01\x02 \x00"), max_size=8)
NAMES = st.one_of(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "é", ""]), TEXT)
KEYS_VALUE = st.lists(st.sampled_from(["k1", "key-2", "", "é", "😀"]), max_size=4).map(" ".join)


@st.composite
def properties_bytes(draw: st.DrawFn) -> bytes:
    """Well-formed properties, repeated names, stray separators, and bytes that are not
    UTF-8, in any mix."""
    pieces = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["pair", "keys", "text", "bad", "binary"]))
        if kind == "pair":
            pieces.append(f"{draw(NAMES)}\x01{draw(TEXT)}".encode())
        elif kind == "keys":
            pieces.append(f"KEYS\x01{draw(KEYS_VALUE)}".encode())
        elif kind == "text":
            pieces.append(draw(TEXT).encode())
        elif kind == "bad":
            pieces.append(draw(NAMES).encode() + draw(BAD_UTF8) + b"\x01" + draw(BAD_UTF8))
        else:
            pieces.append(draw(st.binary(max_size=12)))
    trailer = draw(st.sampled_from([b"", b"\x02"]))
    return b"\x02".join(pieces) + trailer


@st.composite
def records(draw: st.DrawFn) -> bytes:
    """A record `record.encode_record` wrote for a random layout and fields (PHYSICALOFFSET
    is stamped where it lands)."""
    born_v6, store_v6, v2 = draw(st.tuples(st.booleans(), st.booleans(), st.booleans()))
    layout = record.LAYOUTS[born_v6, store_v6, v2]
    topic = draw(st.one_of(TEXT.map(str.encode), st.binary(max_size=300 if v2 else 127)))
    encoded = bytearray(record.encode_record(
        layout=layout, queue_id=draw(INT32), flag=draw(INT32),
        sysflag=draw(st.integers(0, (1 << 31) - 1)) & ~0x30, born_timestamp_ms=draw(INT64),
        born_host=draw(HOST_V6 if born_v6 else HOST),
        store_host=draw(HOST_V6 if store_v6 else HOST), body=draw(BODIES), topic=topic[:127],
        properties=draw(properties_bytes())))
    record.stamp_record(encoded, 0, store_timestamp_offset=layout.store_timestamp_offset,
                        queue_offset=draw(INT64), physical_offset=0,
                        store_timestamp_ms=draw(INT64))
    return bytes(encoded)


@dataclasses.dataclass
class Segment:
    data: bytes
    base: int
    starts: list[int]


@st.composite
def segments(draw: st.DrawFn) -> Segment:
    """Records one after another, each naming its own position, then the segment's end
    (zeros, a BLANK, or junk), maybe damaged (bytes flipped or zeroed)."""
    base = draw(st.one_of(st.just(0), st.integers(0, 1 << 40)))
    data = bytearray()
    starts = []
    for encoded in draw(st.lists(records(), max_size=5)):
        starts.append(len(data))
        data += encoded
        data[starts[-1] + 28:starts[-1] + 36] = (base + starts[-1]).to_bytes(8, "big")
    end = draw(st.sampled_from(["zeros", "blank", "junk", "none"]))
    if end == "zeros":
        data += bytes(draw(st.integers(1, 16)))
    elif end == "blank":
        size = draw(st.integers(8, 24))
        data += record.MAGIC_BLANK.to_bytes(4, "big", signed=True).rjust(8, b"\0")
        data[-8:-4] = size.to_bytes(4, "big")
        data += bytes(size - 8)
    elif end == "junk":
        data += draw(st.binary(min_size=1, max_size=24))
    for _ in range(draw(st.integers(0, 3)) if data else 0):
        index = draw(st.integers(0, len(data) - 1))
        if draw(st.booleans()):
            data[index] = draw(st.integers(0, 255))
        else:
            data[index:index + draw(st.integers(1, 16))] = bytes(16)[:len(data[index:])]
    return Segment(bytes(data), base, starts)


@contextmanager
def as_buffer(data: bytes, kind: str) -> Iterator[Any]:
    """`data` as one of the buffer types the data source reads segments from."""
    if kind == "mmap" and data:
        mapping = mmap.mmap(-1, len(data))
        mapping[:] = data
        try:
            yield mapping
        finally:
            mapping.close()
    elif kind in ("memoryview", "mmap"):
        with memoryview(bytearray(data)) as view:
            yield view
    else:
        yield bytes(data) if kind == "bytes" else bytearray(data)


def _outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[object, ...]:
    """What a call did: its result, or the type and text of what it raised."""
    try:
        return ("returned", function(*args, **kwargs))
    except Exception as error:  # any exception is an outcome to compare
        return ("raised", type(error), str(error))


def _heads_fields(heads: decode.Heads) -> tuple[object, ...]:
    return (heads.starts.tolist(), *(getattr(heads, name).tolist()
                                     for name in decode.HEAD_COLUMNS), heads.problems)


def _columns_fields(columns: record_columns.RecordColumns) -> tuple[object, ...]:
    arrays = [getattr(columns, field.name) for field in dataclasses.fields(columns)]
    for array in arrays:
        array.validate(full=True)
    return tuple((array.type, array.to_pylist()) for array in arrays)


def assert_same(compiled: Callable[..., Any], reference: Callable[..., Any],
                compare: Callable[[Any], object], *args: Any, **kwargs: Any) -> None:
    c = _outcome(compiled, *args, **kwargs)
    python = _outcome(reference, *args, **kwargs)
    if c[0] == python[0] == "returned":
        assert compare(c[1]) == compare(python[1])
    else:
        assert c == python


def test_the_extension_is_built_from_the_current_source() -> None:
    """An edit of storage/format/_walk.c needs a rebuild (scripts/setup.sh) before these
    tests mean anything: the loaded .so must be newer than the source it was built from."""
    source = Path(__file__).parents[2] / "storage" / "format" / "_walk.c"
    built = Path(compiled_walk.walk_extension().__file__ or "").resolve()
    assert built.stat().st_mtime >= source.stat().st_mtime, (
        f"{built} is older than {source}: run scripts/setup.sh")


# ---------------------------------------------------------------- walk_starts

@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(segments(), st.sampled_from(BUFFER_KINDS), st.data())
def test_walk_starts_on_random_segments(segment: Segment, kind: str, data: st.DataObject) -> None:
    size = len(segment.data)
    range_start = data.draw(st.sampled_from([0, *segment.starts]) | st.integers(0, size))
    range_end = data.draw(st.integers(0, size + 200))
    limit = data.draw(st.integers(0, size))
    with as_buffer(segment.data, kind) as buffer:
        c_starts, c_stop = walk._walk_starts_compiled(buffer, range_start, range_end, limit)
        starts, stop = walk.walk_starts_reference(buffer, range_start, range_end, limit)
    assert (c_starts.tolist(), c_stop) == (starts.tolist(), stop)
    assert c_starts.dtype == np.int64


# ---------------------------------------------------------------- decode_heads

@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(segments(), st.sampled_from(BUFFER_KINDS), st.booleans(), st.data())
def test_decode_heads_on_random_segments(segment: Segment, kind: str, verify_crc: bool,
                                         data: st.DataObject) -> None:
    size = len(segment.data)
    extra = data.draw(st.lists(st.integers(-3, size + 3), max_size=3))
    starts = np.array(segment.starts + extra, dtype=np.int64)
    with as_buffer(segment.data, kind) as buffer:
        assert_same(decode._decode_heads_compiled, decode.decode_heads_reference,
                    _heads_fields, buffer, starts, base=segment.base, verify_crc=verify_crc)


@settings(max_examples=100)
@given(st.lists(records(), min_size=1, max_size=4), st.booleans())
def test_well_formed_records_are_good_in_both(encoded: list[bytes], verify_crc: bool) -> None:
    data = bytearray()
    for one in encoded:
        data += one
        data[len(data) - len(one) + 28:len(data) - len(one) + 36] = \
            (len(data) - len(one)).to_bytes(8, "big")
    starts, _ = walk.walk_starts_reference(bytes(data), 0, len(data), len(data))
    heads = decode._decode_heads_compiled(bytes(data), starts, base=0, verify_crc=verify_crc)
    assert heads.problems == {}
    assert _heads_fields(heads) == _heads_fields(decode.decode_heads_reference(
        bytes(data), starts, base=0, verify_crc=verify_crc))


# ---------------------------------------------------------------- record_columns

@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(segments(), st.sampled_from(BUFFER_KINDS))
def test_record_columns_of_good_records(segment: Segment, kind: str) -> None:
    with as_buffer(segment.data, kind) as buffer:
        heads = decode.decode_heads_reference(buffer, np.array(segment.starts, np.int64),
                                              base=segment.base, verify_crc=False)
        good = heads.starts[[i for i in range(len(heads.starts)) if i not in heads.problems]]
        assert_same(record_columns._record_columns_compiled,
                    record_columns.record_columns_reference, _columns_fields, buffer, good)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(segments(), st.data())
def test_record_columns_anywhere_behaves_as_the_reference(segment: Segment,
                                                          data: st.DataObject) -> None:
    """Starts that are no good record: C hands them to the reference, whatever it does."""
    positions = data.draw(st.lists(st.integers(-2, len(segment.data) + 2), max_size=3))
    starts = np.array(segment.starts + positions, dtype=np.int64)
    assert_same(record_columns._record_columns_compiled,
                record_columns.record_columns_reference, _columns_fields, segment.data, starts)


@given(st.lists(st.tuples(NAMES, TEXT), max_size=8), st.booleans())
def test_repeated_property_names_keep_their_first_place_and_last_value(
        pairs: list[tuple[str, str]], bad: bool) -> None:
    """As `decode_properties` (a dict) has them, not repeated in the map."""
    encoded = b"".join(f"{name}\x01{value}\x02".encode() for name, value in pairs)
    if bad:
        encoded += b"\xff\x01\xfe\x02"
    layout = record.LAYOUTS[False, False, False]
    one = record.encode_record(layout=layout, queue_id=0, flag=0, sysflag=0,
                               born_timestamp_ms=0, born_host=(bytes(4), 1),
                               store_host=(bytes(4), 2), body=b"", topic=b"T",
                               properties=encoded)
    starts = np.zeros(1, np.int64)
    columns = record_columns._record_columns_compiled(one, starts)
    assert _columns_fields(columns) == _columns_fields(
        record_columns.record_columns_reference(one, starts))
    names = [name for name, _ in columns.properties.to_pylist()[0]]
    assert len(names) == len(set(names))


# ---------------------------------------------------------------- other arguments

def test_other_buffer_types_are_handed_to_the_reference(
        written_store: tuple[Path, list[StoredMessage]]) -> None:
    """A memoryview of signed chars is no buffer C reads: the reference answers."""
    directory, _ = written_store
    data = (directory / "commitlog" / f"{0:020d}").read_bytes()
    assert len(data) == SEGMENT_BYTES
    with memoryview(data).cast("c") as as_chars:
        starts, stop = walk._walk_starts_compiled(as_chars, 0, len(data), len(data))
        reference_starts, reference_stop = walk.walk_starts_reference(data, 0, len(data),
                                                                      len(data))
        assert (starts.tolist(), stop) == (reference_starts.tolist(), reference_stop)
        assert_same(decode._decode_heads_compiled, decode.decode_heads_reference,
                    _heads_fields, as_chars, starts, base=0, verify_crc=True)
        assert_same(record_columns._record_columns_compiled,
                    record_columns.record_columns_reference, _columns_fields, as_chars, starts)


def test_a_whole_store_decodes_identically(
        written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, stored = written_store
    rows = 0
    for path in sorted((directory / "commitlog").iterdir()):
        data, base = path.read_bytes(), int(path.name)
        starts, _ = walk._walk_starts_compiled(data, 0, len(data), len(data))
        heads = decode._decode_heads_compiled(data, starts, base=base, verify_crc=True)
        assert heads.problems == {}
        assert _heads_fields(heads) == _heads_fields(
            decode.decode_heads_reference(data, starts, base=base, verify_crc=True))
        assert _columns_fields(record_columns._record_columns_compiled(data, starts)) == \
            _columns_fields(record_columns.record_columns_reference(data, starts))
        rows += len(starts)
    assert rows == len(stored)


def test_the_bound_extension_is_the_expected_version() -> None:
    extension = compiled_walk.walk_extension()
    assert extension.ABI_VERSION == compiled_walk.ABI_VERSION
    with pytest.raises(TypeError):
        extension.walk_starts(b"", 0)  # type: ignore[call-arg]
