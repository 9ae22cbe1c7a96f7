"""The batch split in C (`split_batch`, storage/format/_records.c) against its Python reference
(storage/format/batch_body.py): random batch bodies -- well formed, cut, with sizes that do
not add up, with and without the last separator, with entries that set the batch's own
properties themselves -- give the same entries or the same exception, as do arguments of
other types.

These need the extension built (scripts/setup.sh): they bind the C twin themselves, so they
compare C with Python even when MQSTORE_NO_EXTENSIONS=1.
"""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.storage.format import compiled
from mqstore.storage.format.batch_body import (
    BatchBodyError,
    property_pairs,
    split_batch_reference,
)

c_split_batch = compiled.compiled_twin(split_batch_reference)

NAMES = st.sampled_from([b"UNIQ_KEY", b"WAIT", b"KEYS", b"TAGS", b"A", b"AB", b"\x02", b""])
VALUES = st.binary(max_size=6) | st.sampled_from([b"true", b"v\x01w", b""])
PROPERTIES = st.lists(st.tuples(NAMES, VALUES, st.sampled_from([b"\x01", b"", b"\x01\x01"])),
                      max_size=4).map(
    lambda items: b"\x02".join(name + separator + value for name, separator, value in items))


@st.composite
def entries(draw: st.DrawFn) -> bytes:
    body = draw(st.binary(max_size=40))
    properties = draw(PROPERTIES)
    if draw(st.booleans()) and properties:
        properties += b"\x02"
    total = 20 + len(body) + 2 + len(properties)
    head = struct.pack(">iiiii", total, draw(st.integers(-2, 2)), 0,
                       draw(st.integers(-(1 << 31), (1 << 31) - 1)), len(body))
    return head + body + struct.pack(">h", len(properties)) + properties


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    body = b"".join(draw(st.lists(entries(), max_size=5)))
    damage = draw(st.sampled_from(["none", "none", "cut", "byte", "append"]))
    if damage == "cut" and body:
        body = body[:draw(st.integers(0, len(body) - 1))]
    elif damage == "byte" and body:
        at = draw(st.integers(0, len(body) - 1))
        body = body[:at] + bytes([draw(st.integers(0, 255))]) + body[at + 1:]
    elif damage == "append":
        body += draw(st.binary(max_size=24))
    return body


def _outcome(function: Any, *args: Any) -> tuple[object, ...]:
    try:
        return ("returned", function(*args))
    except Exception as error:  # any exception is an outcome to compare
        return ("raised", type(error), str(error))


@settings(max_examples=600)
@given(bodies(), PROPERTIES, st.integers(-1, 6))
def test_random_bodies_split_the_same(body: bytes, outer: bytes, entries_max: int) -> None:
    assert _outcome(c_split_batch, body, outer, entries_max) == \
        _outcome(split_batch_reference, body, outer, entries_max)


def test_the_batch_properties_follow_each_entrys_unless_it_sets_them() -> None:
    entry = b"UNIQ_KEY\x01e1\x02WAIT\x01true"
    body = struct.pack(">iiiii", 20 + 1 + 2 + len(entry), 0, 0, 7, 1) + b"x" + \
        struct.pack(">h", len(entry)) + entry
    outer = b"UNIQ_KEY\x01batch\x02KEYS\x01k\x02"
    for function in (c_split_batch, split_batch_reference):
        assert function(body, outer, 10) == [
            (b"x", 7, b"UNIQ_KEY\x01e1\x02WAIT\x01true\x02KEYS\x01k\x02")]
        assert _outcome(function, b"", outer, 10)[1] is BatchBodyError
    assert property_pairs(outer) == [(b"UNIQ_KEY\x01", b"UNIQ_KEY\x01batch\x02"),
                                     (b"KEYS\x01", b"KEYS\x01k\x02")]


@given(st.sampled_from([(bytearray(b"abc"), b"", 1), (b"", bytearray(), 1), (b"", b"", 1.0),
                        (b"", b"", True), (b"", b"", 1 << 70)]))
def test_other_arguments_behave_as_the_reference(args: tuple[Any, ...]) -> None:
    assert _outcome(c_split_batch, *args) == _outcome(split_batch_reference, *args)


def test_more_batch_properties_than_the_c_code_holds_go_to_the_reference() -> None:
    outer = b"\x02".join(b"P%d\x01v" % number for number in range(100))
    body = struct.pack(">iiiii", 23, 0, 0, 0, 1) + b"x" + struct.pack(">h", 0)
    assert c_split_batch(body, outer, 5) == split_batch_reference(body, outer, 5)
