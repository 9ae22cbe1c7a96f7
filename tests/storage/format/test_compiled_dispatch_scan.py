"""Dispatch's record walk in C (`scan_records`, storage/format/_records.c) against its
Python reference (storage/format/dispatch_scan.py): random runs of records, damaged at
random, in every buffer type, with random bounds -- identical records (type and values),
the identical stop position, or the identical exception.

The C twin is bound here, so this compares C with Python even when MQSTORE_NO_EXTENSIONS=1
makes the store run the reference; without a built extension it fails at collection.
"""

from __future__ import annotations

import array
import mmap
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.storage.format import record
from mqstore.storage.format.dispatch_scan import (
    DispatchRecord,
    compiled_scan_records,
    scan_records_reference,
)
from tests.storage.format.buffer_kinds import BUFFER_KINDS, as_buffer

c_scan_records = compiled_scan_records()

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
PROPERTY_BYTES = st.one_of(
    st.binary(max_size=60),
    st.lists(st.sampled_from([b"TAGS\x01TagA", b"KEYS\x01k1 k2", b"UNIQ_KEY\x01AB12",
                              b"DELAY\x013", b"\xff\xfe\x01x", b"a\x01", b"\x01b", b"x\x01\xe9"]),
             max_size=5).map(b"\x02".join))
TOPICS = st.one_of(st.sampled_from([b"TopicA", b"TopicB", b"rmq_sys_mqstore_padding"]),
                   st.binary(max_size=20))


def _outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[object, ...]:
    """What a call did: its result (with each record's type), or what it raised."""
    try:
        result = function(*args, **kwargs)
    except Exception as error:  # any exception is an outcome to compare
        return ("raised", type(error), str(error))
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], list):
        return ("returned", [(type(item), item) for item in result[0]], result[1])
    return ("returned", result)


def assert_same_scan(*args: Any, **kwargs: Any) -> tuple[object, ...]:
    c = _outcome(c_scan_records, *args, **kwargs)
    reference = _outcome(scan_records_reference, *args, **kwargs)
    assert c == reference
    return c


@st.composite
def runs(draw: st.DrawFn) -> tuple[bytearray, int]:
    """(segment bytes, segment start): whole records of random layouts, each stamped with
    its own log position, back to back after random leading bytes."""
    segment_start = draw(st.sampled_from([0, 1 << 30, (1 << 62) - (1 << 20)]))
    data = bytearray(draw(st.binary(max_size=8)))
    for _ in range(draw(st.integers(0, 8))):
        born_v6, store_v6, v2 = draw(st.tuples(st.booleans(), st.booleans(), st.booleans()))
        layout = record.LAYOUTS[born_v6, store_v6, v2]
        encoded = bytearray(record.encode_record(
            layout=layout, queue_id=draw(INT32), flag=0,
            sysflag=draw(st.sampled_from([0, 4, 8, 12, 0x40])),
            born_timestamp_ms=1, born_host=(bytes(16 if born_v6 else 4), 1),
            store_host=(bytes(16 if store_v6 else 4), 2), body=draw(st.binary(max_size=30)),
            topic=draw(TOPICS), properties=draw(PROPERTY_BYTES)))
        record.stamp_record(encoded, 0, store_timestamp_offset=layout.store_timestamp_offset,
                            queue_offset=draw(INT64), physical_offset=segment_start + len(data),
                            store_timestamp_ms=draw(INT64))
        data += encoded
    return data, segment_start


def _damage(draw: st.DrawFn, data: bytearray) -> None:
    for corruption in draw(st.lists(st.sampled_from(["flip", "zeros", "blank", "size"]),
                                    max_size=3)):
        if not data:
            return
        index = draw(st.integers(0, len(data) - 1))
        if corruption == "flip":
            data[index] = draw(st.integers(0, 255))
        elif corruption == "zeros":
            end = min(len(data), index + draw(st.integers(1, 64)))
            data[index:end] = bytes(end - index)
        elif corruption == "blank" and index + 8 <= len(data):
            record.write_blank(data, index, draw(st.integers(8, len(data) - index + 8)))
        elif index + 4 <= len(data):
            data[index:index + 4] = draw(INT32).to_bytes(4, "big", signed=True)


@st.composite
def scans(draw: st.DrawFn) -> tuple[bytes, int, int, int, int, int]:
    """(bytes, position, end, limit, segment start, records max), damaged at random."""
    data, segment_start = draw(runs())
    if draw(st.booleans()):
        _damage(draw, data)
    data += bytes(draw(st.integers(0, 16)))
    limit = draw(st.one_of(st.just(len(data)), st.integers(0, len(data))))
    end = draw(st.one_of(st.just(limit), st.integers(0, len(data) + 8)))
    position = draw(st.one_of(st.integers(0, 8), st.integers(0, len(data))))
    records_max = draw(st.one_of(st.just(1 << 20), st.integers(-1, 10)))
    return bytes(data), position, end, limit, segment_start, records_max


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(scans(), st.sampled_from(BUFFER_KINDS))
def test_scan_of_random_damaged_runs(scan: tuple[bytes, int, int, int, int, int],
                                     kind: str) -> None:
    data, *bounds = scan
    with as_buffer(data, kind) as buffer:
        assert_same_scan(buffer, *bounds)


@settings(max_examples=200)
@given(runs(), st.sampled_from(BUFFER_KINDS))
def test_whole_runs_are_read_to_the_end_by_both(run: tuple[bytearray, int], kind: str) -> None:
    data, segment_start = run
    leading = 0
    while leading < len(data) and record.check_record_reference(
            bytes(data), leading, limit=len(data),
            expected_physical_offset=segment_start + leading,
            verify_crc=False).status is not record.RecordCheck.OK:
        leading += 1
    with as_buffer(bytes(data), kind) as buffer:
        outcome = assert_same_scan(buffer, leading, len(data), len(data), segment_start, 100)
    assert outcome[0] == "returned"
    assert all(kind is DispatchRecord for kind, _ in outcome[1])  # type: ignore[attr-defined]


def test_a_long_run_is_walked_in_chunks_without_the_gil() -> None:
    """More records than one C chunk (1024) and the GIL released: still the same run."""
    layout = record.LAYOUTS[False, False, False]
    data = bytearray()
    for number in range(3000):
        encoded = bytearray(record.encode_record(
            layout=layout, queue_id=number % 7, flag=0, sysflag=0, born_timestamp_ms=1,
            born_host=(bytes(4), 1), store_host=(bytes(4), 2), body=b"x" * (number % 40),
            topic=b"TopicA" if number % 3 else b"TopicB",
            properties=b"TAGS\x01T%d\x02KEYS\x01k%d" % (number % 5, number)))
        record.stamp_record(encoded, 0, store_timestamp_offset=layout.store_timestamp_offset,
                            queue_offset=number, physical_offset=len(data),
                            store_timestamp_ms=number)
        data += encoded
    for records_max in (3000, 2500, 1024, 1025, 63, 64):
        outcome = assert_same_scan(bytes(data), 0, len(data), len(data), 0, records_max)
        assert len(outcome[1]) == records_max  # type: ignore[arg-type]


def _one_record() -> bytes:
    layout = record.LAYOUTS[True, True, False]
    return record.encode_record(layout=layout, queue_id=1, flag=0, sysflag=0,
                                born_timestamp_ms=5, born_host=(bytes(16), 1),
                                store_host=(bytes(16), 2), body=b"body", topic=b"T",
                                properties=b"TAGS\x01a")


def test_a_head_cut_at_the_buffer_end_raises_as_the_reference() -> None:
    """Two whole records, then one whose v6 head runs past the buffer: the reference
    raises struct.error there, and so does the C twin (it hands the rest over)."""
    one = _one_record()
    data = bytearray(one + one + one[:100])
    record.stamp_record(data, len(one), store_timestamp_offset=record.LAYOUTS[
        True, True, False].store_timestamp_offset, queue_offset=0, physical_offset=len(one),
        store_timestamp_ms=0)
    data[2 * len(one):2 * len(one) + 4] = (95).to_bytes(4, "big")
    for kind in BUFFER_KINDS:
        with as_buffer(bytes(data), kind) as buffer:
            outcome = assert_same_scan(buffer, 0, len(data), len(data), 0, 10)
            assert outcome[0] == "raised"


class _Int(int):
    pass


@pytest.mark.parametrize("arguments", [
    (0, 10, 10, 0), (_Int(0), 10, 10, 0, 5), (0, 10, 10, 0, 5.0), (0, 10, 1 << 70, 0, 5),
    (0, 10, 10, -1, 5), (0, 10, 10, 1 << 63, 5), (-1, 10, 10, 0, 5), (1 << 70, 10, 10, 0, 5),
    (0, 1 << 70, 10, 0, 5), (0, 10, 10, 0, 1 << 70), (0, 10, -1, 0, 5), (0, 10, 500, 0, 5),
])
def test_unusual_arguments_behave_as_the_reference(arguments: tuple[Any, ...]) -> None:
    one = _one_record()
    for kind in BUFFER_KINDS:
        with as_buffer(one, kind) as buffer:
            assert_same_scan(buffer, *arguments)
    assert_same_scan(one, 0, 10, 10, 0, records_max=5)


@pytest.mark.parametrize("make", [
    lambda data: array.array("B", data),
    lambda data: memoryview(data).cast("c"),
    lambda data: memoryview(data)[::2],
    lambda data: "not a buffer",
    lambda data: None,
])
def test_other_buffer_types_behave_as_the_reference(make: Callable[[bytes], object]) -> None:
    one = _one_record()
    assert_same_scan(make(one), 0, len(one), len(one), 0, 5)


def test_released_and_closed_buffers_raise_as_the_reference() -> None:
    view = memoryview(_one_record())
    view.release()
    assert_same_scan(view, 0, 10, 10, 0, 5)
    mapping = mmap.mmap(-1, 200)
    mapping.close()
    assert_same_scan(mapping, 0, 10, 10, 0, 5)


@pytest.mark.parametrize(("setting", "expected"), [("1", "reference"), (None, "compiled"),
                                                   ("0", "compiled")])
def test_dispatch_picks_the_walk_by_the_environment(setting: str | None, expected: str) -> None:
    code = ("from mqstore.storage.dispatch import dispatcher\n"
            "from mqstore.storage.format import dispatch_scan\n"
            "print('reference' if dispatcher.scan_records is "
            "dispatch_scan.scan_records_reference else 'compiled', "
            "dispatcher.scan_records.__module__)\n")
    environment = {key: value for key, value in os.environ.items()
                   if key != "MQSTORE_NO_EXTENSIONS"}
    if setting is not None:
        environment["MQSTORE_NO_EXTENSIONS"] = setting
    run = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                         text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [expected, "mqstore.storage.format.dispatch_scan"]
