"""Finding record starts in a segment: the walk along TOTALSIZE, and re-synchronising in the
middle of one.

A commit log has no sync markers, so the only way to know where records start is to walk from
a known start along each record's TOTALSIZE (storage/format/record.py: @0 TOTALSIZE, @4 MAGIC).  A
segment's first record starts at byte 0; a task that reads a byte range [a, b) of a segment
instead of all of it needs the first record starting at or after `a`.  Every record names
its own position in PHYSICALOFFSET (@28), so a record start is recognised by a MAGIC at +4 and
PHYSICALOFFSET equal to where it sits; `find_record_start` also follows the chain for
`SYNC_CHAIN_RECORDS` more records before trusting a candidate, so a body that happens to
contain those 12 bytes cannot fool it.  Each range-reading task walks records starting in
[sync(a), b) and then checks that the walk arrived exactly at sync(b): the ranges of one
segment cover each record once, or the query fails (`RangeBoundaryError`), never silently.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from array import array

import numpy as np
import numpy.typing as npt

from mqstore.storage.errors import StoreFormatError
from mqstore.storage.format import record

from .compiled_walk import pick, walk_extension

FIXED_SIZE_BYTES_MIN = 91
"""The smallest record (v1, IPv4 hosts, empty body, topic and properties)."""

SYNC_CHAIN_RECORDS = 2
SYNC_CHUNK_BYTES = 1 << 20
"""Bytes searched for MAGIC per numpy pass while re-synchronising."""

_SIZE_AND_MAGIC = struct.Struct(">ii")
_PHYSICAL_OFFSET = struct.Struct(">q")
_PHYSICAL_OFFSET_AT = 28
_MAGICS = (record.MAGIC_V1, record.MAGIC_V2)

Positions = npt.NDArray[np.int64]


class RangeBoundaryError(StoreFormatError):
    """Two tasks reading neighbouring ranges of a segment disagree on a record boundary."""


class WalkStop(enum.Enum):
    RANGE_END = "range end"
    """The next record starts at or after the range's end (another task reads it)."""
    BLANK = "blank"
    END = "end"
    """Zeros: the never-written tail of the segment."""
    READABLE_END = "readable end"
    """The next record is not (wholly) below the writer's published committed position."""
    CORRUPT = "corrupt"


@dataclasses.dataclass(frozen=True)
class Corruption:
    physical_offset: int
    reason: str


@dataclasses.dataclass
class Walk:
    starts: Positions
    """Record starts relative to the segment, in order."""
    stop: WalkStop
    stop_position: int
    """Relative position where the walk stopped (a record start unless CORRUPT)."""
    corruption: Corruption | None = None


def walk_starts_reference(buffer: record.ReadableBuffer, range_start: int, range_end: int,
                          limit: int) -> tuple[Positions, int]:
    """Walk along TOTALSIZE from `range_start` while records start before `range_end` and a
    record (v1 / v2 magic, a TOTALSIZE that fits) ends by `limit`.  Returns the record
    starts and where the walk stopped.  The reference of `walk_starts` (compiled_walk.py)."""
    unpack = _SIZE_AND_MAGIC.unpack_from
    starts = array("q")
    position = range_start
    while position < range_end and limit - position >= record.BLANK_SIZE_BYTES:
        total_size, magic = unpack(buffer, position)
        if magic not in _MAGICS or not FIXED_SIZE_BYTES_MIN <= total_size <= limit - position:
            break
        starts.append(position)
        position += total_size
    return np.frombuffer(starts, np.int64), position


def _walk_starts_compiled(buffer: record.ReadableBuffer, range_start: int, range_end: int,
                          limit: int) -> tuple[Positions, int]:
    found = walk_extension().walk_starts(buffer, range_start, range_end, limit)
    if found is None:
        return walk_starts_reference(buffer, range_start, range_end, limit)
    starts, position = found
    return np.frombuffer(starts, np.int64), position


walk_starts = pick(walk_starts_reference, _walk_starts_compiled)
"""Record starts along TOTALSIZE (see `walk_starts_reference`): storage/format/_walk.c, or
the reference itself when MQSTORE_NO_EXTENSIONS=1."""


def walk_records(buffer: record.ReadableBuffer, *, base: int, range_start: int,
                 range_end: int, limit: int) -> Walk:
    """Record starts in [range_start, range_end) of a segment starting at `base`, walking from
    `range_start` (a record start); records must end at or before `limit` (relative)."""
    size_bytes = len(buffer)
    assert 0 <= range_start <= size_bytes
    assert limit <= size_bytes
    starts, position = walk_starts(buffer, range_start, range_end, limit)
    if position >= range_end:
        return Walk(starts, WalkStop.RANGE_END, position)
    if limit - position < record.BLANK_SIZE_BYTES:
        stop = WalkStop.END if limit == size_bytes else WalkStop.READABLE_END
        return Walk(starts, stop, position)
    total_size, magic = _SIZE_AND_MAGIC.unpack_from(buffer, position)
    stop, reason = _classify_stop(total_size, magic, position=position, limit=limit,
                                  size_bytes=size_bytes)
    corruption = Corruption(base + position, reason) if reason else None
    return Walk(starts, stop, position, corruption)


def _classify_stop(total_size: int, magic: int, *, position: int, limit: int,
                   size_bytes: int) -> tuple[WalkStop, str]:
    if magic == record.MAGIC_BLANK:
        return WalkStop.BLANK, ""
    if magic == 0 and total_size == 0:
        return WalkStop.END, ""
    if magic in _MAGICS:
        if limit < size_bytes and total_size <= size_bytes - position:
            return WalkStop.READABLE_END, ""  # being appended beyond the committed position
        return WalkStop.CORRUPT, (f"TOTALSIZE {total_size} outside [{FIXED_SIZE_BYTES_MIN}, "
                                  f"{limit - position}]")
    return WalkStop.CORRUPT, f"bad magic 0x{magic & 0xFFFFFFFF:08X}"


def find_record_start(buffer: record.ReadableBuffer, *, base: int, from_position: int,
                      limit: int) -> int | None:
    """The first record start at or after `from_position` (relative), or None if no record
    starts in [from_position, limit)."""
    if from_position == 0:
        return 0
    array_view = np.frombuffer(buffer, dtype=np.uint8)
    chunk_start = max(0, from_position + 4)
    while chunk_start < limit:
        chunk_end = min(limit, chunk_start + SYNC_CHUNK_BYTES + 3)
        chunk = array_view[chunk_start:chunk_end]
        found = np.flatnonzero((chunk[:-3] == 0xDA) & (chunk[1:-2] == 0xA3)
                               & (chunk[2:-1] == 0x20) & ((chunk[3:] == 0xA7)
                                                          | (chunk[3:] == 0xAB)))
        for magic_at in found.tolist():
            candidate = chunk_start + magic_at - 4
            if candidate >= from_position and _chain_holds(buffer, base=base,
                                                           position=candidate, limit=limit):
                return candidate
        if chunk_end >= limit:
            break
        chunk_start = chunk_end - 3
    return None


def _chain_holds(buffer: record.ReadableBuffer, *, base: int, position: int,
                 limit: int) -> bool:
    """Whether `position` and the next SYNC_CHAIN_RECORDS records all name themselves."""
    for _ in range(SYNC_CHAIN_RECORDS + 1):
        if limit - position < record.BLANK_SIZE_BYTES:
            return True
        total_size, magic = _SIZE_AND_MAGIC.unpack_from(buffer, position)
        if magic == record.MAGIC_BLANK or (magic == 0 and total_size == 0):
            return True
        if magic not in _MAGICS or not FIXED_SIZE_BYTES_MIN <= total_size <= limit - position:
            return False
        (physical_offset,) = _PHYSICAL_OFFSET.unpack_from(buffer, position + _PHYSICAL_OFFSET_AT)
        if physical_offset != base + position:
            return False
        position += total_size
    return True
