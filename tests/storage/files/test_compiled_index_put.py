"""The index's write loop in C (`put_index_keys`, storage/format/_records.c) against its
Python reference (storage/files/index_put.py): the same random files, header states and
runs of messages give byte-identical files, headers and stopping points -- or the same
exception.  Small files fill mid-run; slots collide; times go back and jump past INT32_MAX
seconds; keys are non-ASCII, outside the BMP, or surrogates; arguments of other types go
to the reference.

These need the extension built (scripts/setup.sh): they bind the C twin themselves, so they
compare C with Python even when MQSTORE_NO_EXTENSIONS=1.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.storage.files.index_put import (
    HASH_SLOT,
    INDEX_ENTRY,
    INDEX_HEADER,
    put_index_keys_reference,
)
from mqstore.storage.format import compiled

c_put_index_keys = compiled.compiled_twin(put_index_keys_reference)

KEYS = st.one_of(st.sampled_from(["T#a", "T#Aa", "T#BB", "T#T#TagA", "", "polygenelubricants"]),
                 st.text(max_size=12))
MESSAGES = st.lists(st.tuples(st.integers(0, 1 << 40),
                              st.integers(-5, 1 << 45) | st.sampled_from([0, 1000, 999]),
                              st.lists(KEYS, max_size=4)), max_size=12)


def _file(slot_count: int, index_max: int, fill: bytes) -> bytearray:
    size = INDEX_HEADER.size + slot_count * HASH_SLOT.size + index_max * INDEX_ENTRY.size
    return bytearray((fill * size)[:size])


def _outcome(function: Callable[..., Any], buffer: Any, *args: Any) -> tuple[object, ...]:
    header = list(args[3])
    try:
        result: object = ("returned", function(buffer, args[0], args[1], args[2], header,
                                               *args[4:]))
    except Exception as error:  # any exception is an outcome to compare
        result = ("raised", type(error), str(error))
    return result, header, bytes(buffer)


@settings(max_examples=400)
@given(st.integers(1, 7), st.integers(2, 9), st.sampled_from([b"\0", b"\x01\x00\x00\x07", b"\xff"]),
       st.tuples(st.integers(-3, 1 << 44), st.integers(0, 1 << 44), st.integers(0, 1 << 40),
                 st.integers(0, 1 << 40), st.integers(0, 9), st.integers(0, 10)),
       MESSAGES, st.integers(0, 3), st.integers(0, 3), st.booleans())
def test_random_runs_store_the_same_bytes(slot_count: int, index_max: int, fill: bytes,
                                          header: tuple[int, ...], messages: list[Any],
                                          first: int, key_first: int, mapped: bool) -> None:
    first = min(first, len(messages))
    entries_position = INDEX_HEADER.size + slot_count * HASH_SLOT.size
    outcomes = []
    for function in (c_put_index_keys, put_index_keys_reference):
        buffer: Any = _file(slot_count, index_max, fill)
        if mapped:
            mapping = mmap.mmap(-1, len(buffer))
            mapping[:] = buffer
            buffer = mapping
        outcomes.append(_outcome(function, buffer, entries_position, slot_count, index_max,
                                 list(header), messages, first, key_first))
    assert outcomes[0] == outcomes[1]


def test_a_run_that_fills_the_file_stops_at_the_first_key_not_stored() -> None:
    messages = [(100, 5000, ["T#a", "T#b"]), (200, 6000, []), (300, 7000, ["T#c", "T#d"])]
    for function in (c_put_index_keys, put_index_keys_reference):
        header = [0, 0, 0, 0, 0, 1]
        buffer = _file(2, 4, b"\0")
        assert function(buffer, 48, 2, 4, header, messages, 0, 0) == (2, 1)  # 3 entries: a b c
        assert header == [5000, 7000, 100, 300, 2, 4]
        assert function(buffer, 48, 2, 4, header, messages, 2, 1) == (2, 1)  # full: nothing
        header = [0, 0, 0, 0, 0, 1]
        assert function(_file(2, 9, b"\0"), 48, 2, 9, header, messages, 0, 1) == (3, 0)
        assert header[5] == 4  # b, c, d


@given(st.sampled_from([
    ("tuple of keys", lambda m: [(m[0][0], m[0][1], tuple(m[0][2]))]),
    ("list message", lambda m: [list(m[0])]),
    ("bool offset", lambda m: [(True, m[0][1], m[0][2])]),
    ("negative offset", lambda m: [(-1, m[0][1], m[0][2])]),
    ("huge time", lambda m: [(m[0][0], 1 << 70, m[0][2])]),
    ("bytes key", lambda m: [(m[0][0], m[0][1], [b"T#a"])]),
    ("surrogate key", lambda m: [(m[0][0], m[0][1], ["T#\ud800"])]),
    ("short message", lambda m: [(m[0][0], m[0][1])]),
]), st.sampled_from(["bytes", "small", "slot count"]))
def test_other_arguments_behave_as_the_reference(case: tuple[str, Any], buffer_case: str) -> None:
    messages = case[1]([(100, 5000, ["T#a", "T#b"])])
    outcomes = []
    for function in (c_put_index_keys, put_index_keys_reference):
        buffer: Any = _file(2, 5, b"\0")
        slot_count = 2
        if buffer_case == "bytes":
            buffer = bytes(buffer)
        elif buffer_case == "small":
            buffer = buffer[:60]
        else:
            slot_count = 3
        outcomes.append(_outcome(function, buffer, 48, slot_count, 5, [0, 0, 0, 0, 0, 1],
                                 messages, 0, 0))
    assert outcomes[0] == outcomes[1]
