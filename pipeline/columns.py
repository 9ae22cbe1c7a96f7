"""Arrow columns from byte ranges of a segment, built with numpy instead of per-row Python.

PySpark moves a data source's rows to the JVM as Arrow either way; a `read()` that yields
ready `pyarrow.RecordBatch`es skips the per-row conversion, which costs more than decoding
(see docs/benchmarks/spark.md).  So the variable parts of records (topic, properties
and their TAGS and KEYS) are cut out of the segment with index arithmetic:

* `take_ranges` gathers many short byte ranges into one buffer plus Arrow offsets;
* `split_ranges` cuts each record's bytes at a separator (0x02 between properties, a space
  between keys), as `str.split` would, into (start, end, owner) pieces;
* properties follow RocketMQ's decoder (storage/format/properties.py): pieces shorter than 3
  characters and pieces without a NAME_VALUE_SEPARATOR strictly inside are ignored.  A
  property name repeated within one record (no producer writes that) stays repeated in the map;
  TAGS and KEYS take the last, as the engine's dict does.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from mqstore.storage.format.properties import (
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
)

from .schema import KEYS_TYPE, PROPERTIES_TYPE

Bytes = npt.NDArray[np.uint8]
Ints = npt.NDArray[np.int64]

_NAME_VALUE = ord(NAME_VALUE_SEPARATOR)
_PROPERTY = ord(PROPERTY_SEPARATOR)
_KEY = ord(KEY_SEPARATOR)
_TAGS = np.frombuffer(b"TAGS", np.uint8)
_KEYS = np.frombuffer(b"KEYS", np.uint8)


def take_ranges(data: Bytes, starts: Ints, lengths: Ints) -> tuple[Bytes, Ints]:
    """The ranges [start, start + length) of `data`, concatenated, and their offsets (n + 1)."""
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return np.zeros(0, np.uint8), offsets
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
    return data[index], offsets


def string_array(data: Bytes, offsets: Ints, *, validity: npt.NDArray[np.bool_] | None = None
                 ) -> pa.Array:
    """A non-large Arrow string array; bytes that are not UTF-8 are replaced as the engine's
    decoder does (`errors="replace"`)."""
    count = len(offsets) - 1
    assert int(offsets[-1]) < 1 << 31, "one batch's strings must fit 32-bit Arrow offsets"
    bitmap = None
    if validity is not None and not validity.all():
        bitmap = pa.py_buffer(np.packbits(validity, bitorder="little"))
    array = pa.Array.from_buffers(pa.string(), count, [
        bitmap, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        raw = data.tobytes()
        texts = [raw[offsets[i]:offsets[i + 1]].decode("utf-8", "replace")
                 if validity is None or validity[i] else None for i in range(count)]
        array = pa.array(texts, type=pa.string())
    return array


def split_ranges(data: Bytes, offsets: Ints, separator: int) -> tuple[Ints, Ints, Ints]:
    """Cut each record's bytes data[offsets[i]:offsets[i+1]] at `separator`.  Returns the
    pieces' (start, end, record index), in order; a record with k separators has k + 1
    pieces, some possibly empty."""
    count = len(offsets) - 1
    cuts = np.flatnonzero(data == separator).astype(np.int64)
    cut_owner = np.searchsorted(offsets, cuts, side="right") - 1
    ends = np.concatenate([cuts, offsets[1:]])
    owners = np.concatenate([cut_owner, np.arange(count, dtype=np.int64)])
    order = np.lexsort((ends, owners))
    ends, owners = ends[order], owners[order]
    follows_cut = np.zeros(len(ends), dtype=bool)
    follows_cut[1:] = owners[1:] == owners[:-1]
    previous_end = np.concatenate([[0], ends[:-1]])
    starts = np.where(follows_cut, previous_end + 1, offsets[owners])
    return starts, ends, owners


def _named(data: Bytes, starts: Ints, name_ends: Ints, name: Bytes) -> npt.NDArray[np.bool_]:
    matches: npt.NDArray[np.bool_] = name_ends - starts == len(name)
    for index, byte in enumerate(name.tolist()):
        at = np.minimum(starts + index, max(len(data) - 1, 0))
        matches &= data[at] == byte if len(data) else False
    return matches


def _last_per_owner(owners: Ints, chosen: npt.NDArray[np.bool_], count: int) -> Ints:
    """Index of the last chosen piece of each record, -1 if none."""
    last: Ints = np.full(count, -1, dtype=np.int64)
    np.maximum.at(last, owners[chosen], np.flatnonzero(chosen))
    return last


def _value_ranges(value_starts: Ints, value_ends: Ints, piece: Ints) -> tuple[Ints, Ints]:
    """(start, length) of each record's chosen piece's value; (0, 0) where none (-1)."""
    present = piece >= 0
    safe = np.where(present, piece, 0)
    if len(value_starts) == 0:
        return np.zeros(len(piece), np.int64), np.zeros(len(piece), np.int64)
    starts = np.where(present, value_starts[safe], 0)
    return starts, np.where(present, value_ends[safe] - value_starts[safe], 0)


def properties_columns(data: Bytes, offsets: Ints) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(properties map, tags, keys) of records whose properties are data[offsets[i]:...]."""
    count = len(offsets) - 1
    starts, ends, owners = split_ranges(data, offsets, _PROPERTY)
    separators = np.flatnonzero(data == _NAME_VALUE).astype(np.int64)
    found = np.searchsorted(separators, starts)
    separator_at = separators[np.minimum(found, max(len(separators) - 1, 0))] \
        if len(separators) else np.full(len(starts), -1, np.int64)
    valid = (found < len(separators)) & (separator_at > starts) & (separator_at < ends - 1)
    starts, ends, owners, separator_at = (starts[valid], ends[valid], owners[valid],
                                          separator_at[valid])
    names = string_array(*take_ranges(data, starts, separator_at - starts))
    values = string_array(*take_ranges(data, separator_at + 1, ends - separator_at - 1))
    map_offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(np.bincount(owners, minlength=count), out=map_offsets[1:])
    properties = pa.MapArray.from_arrays(pa.array(map_offsets), names, values,
                                         type=PROPERTIES_TYPE)
    value_starts, value_ends = separator_at + 1, ends
    tags_piece = _last_per_owner(owners, _named(data, starts, separator_at, _TAGS), count)
    tag_starts, tag_lengths = _value_ranges(value_starts, value_ends, tags_piece)
    tags = string_array(*take_ranges(data, tag_starts, tag_lengths), validity=tags_piece >= 0)
    keys_piece = _last_per_owner(owners, _named(data, starts, separator_at, _KEYS), count)
    key_starts, key_lengths = _value_ranges(value_starts, value_ends, keys_piece)
    return properties, tags, keys_column(*take_ranges(data, key_starts, key_lengths))


def keys_column(data: Bytes, offsets: Ints) -> pa.Array:
    """KEYS values split on spaces with empty keys dropped (`StoredMessage.keys`)."""
    count = len(offsets) - 1
    starts, ends, owners = split_ranges(data, offsets, _KEY)
    kept = ends > starts
    starts, ends, owners = starts[kept], ends[kept], owners[kept]
    keys = string_array(*take_ranges(data, starts, ends - starts))
    list_offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(np.bincount(owners, minlength=count), out=list_offsets[1:])
    return pa.ListArray.from_arrays(pa.array(list_offsets), keys, type=KEYS_TYPE)


def binary_array(view: memoryview, starts: Ints, ends: Ints) -> pa.Array:
    """Bodies: the batch's span of the segment is copied out once, then one `bytes.join` of
    slices of that copy (measured 170 ns per 100-byte body, against 440 ns when slicing the
    mapping's memoryview and 150–250 ns for numpy gathers, which grow with the body size)."""
    lengths = ends - starts
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        raise ValueError("one Arrow batch of bodies exceeds 2 GiB: lower batchRows")
    if len(starts) == 0:
        joined = b""
    else:
        low = int(starts.min())
        span = view[low:int(ends.max())].tobytes()
        joined = b"".join(map(span.__getitem__, map(slice, (starts - low).tolist(),
                                                    (ends - low).tolist())))
    return pa.Array.from_buffers(pa.binary(), len(starts), [
        None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(joined)])
