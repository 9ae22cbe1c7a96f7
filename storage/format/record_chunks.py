"""Chunks of the commit log as replication ships them: whole records, never a part of one.

The master cuts each chunk at a record boundary (`whole_records_end`), so a follower's log
always ends between records and its dispatch never meets half a record.  The follower checks
every chunk before appending it (`check_chunk`): each record's TOTALSIZE and MAGICCODE, that
a message's PHYSICALOFFSET is its position, and that the sizes add up to the chunk exactly.
That costs one or two unpacks per record (no CRC: recovery verifies CRCs after a crash, as it
does for the master's own log): measured here, 52 µs to cut and 89 µs to check 256 KiB of
1 KiB records.

Layout walked (record.py): @0 TOTALSIZE int32, @4 MAGICCODE int32, @28 PHYSICALOFFSET int64,
@36 SYSFLAG int32, STORETIMESTAMP int64 after the born host (4+4 or 16+4 bytes).  A BLANK
record (TOTALSIZE = the rest of the segment, MAGIC 0xCBD43194) ends a segment.
"""

from __future__ import annotations

import struct

from ..errors import ReplicationGapError
from . import record

_SIZE_AND_MAGIC = struct.Struct(">ii")
_PHYSICAL_OFFSET = struct.Struct(">q")
_SYSFLAG = struct.Struct(">i")
_TIMESTAMP = struct.Struct(">q")
_PHYSICAL_OFFSET_AT = 28
_SYSFLAG_AT = 36
_HEAD_BYTES_MIN = 40
_MESSAGE_MAGICS = (record.MAGIC_V1, record.MAGIC_V2)
_STORE_TIMESTAMP_AT = {
    born_v6: record.LAYOUTS[born_v6, False, False].store_timestamp_offset
    for born_v6 in (False, True)}


def whole_records_end(buffer: record.ReadableBuffer, *, start: int, end: int,
                      size_bytes_max: int) -> int:
    """The last record boundary in (start, end] at most `size_bytes_max` past `start`; if the
    first record alone is larger, its end.  `buffer` positions are segment-relative; `start`
    is a record boundary and everything below `end` is whole records (the readable end)."""
    assert start < end
    if end - start <= size_bytes_max:
        return end  # the readable end is always a record boundary
    position = start
    unpack = _SIZE_AND_MAGIC.unpack_from
    while position < end:
        size, _ = unpack(buffer, position)
        assert size > 0, f"record size {size} at segment position {position}"
        if position + size - start > size_bytes_max and position > start:
            return position
        position += size
    assert position == end, (position, end)
    return end


def record_starts_at(buffer: record.ReadableBuffer, at: int, *, physical_offset: int) -> bool:
    """Whether a record (or a segment's BLANK) starts at segment position `at` of `buffer`,
    a message one stamped with `physical_offset`: where a reconnecting follower says its
    log ends must be a record boundary of this log, or the two logs diverged."""
    if len(buffer) - at < record.BLANK_SIZE_BYTES:
        return False
    size, magic = _SIZE_AND_MAGIC.unpack_from(buffer, at)
    if magic == record.MAGIC_BLANK:
        return bool(size == len(buffer) - at)
    if len(buffer) - at < _HEAD_BYTES_MIN:
        return False
    (physical,) = _PHYSICAL_OFFSET.unpack_from(buffer, at + _PHYSICAL_OFFSET_AT)
    return magic in _MESSAGE_MAGICS and int(physical) == physical_offset


def check_chunk(data: record.ReadableBuffer, *, position: int, segment_room_bytes: int) -> int:
    """Raise `ReplicationGapError` unless `data` (to be appended at log `position`, with
    `segment_room_bytes` left in its segment) is whole records; return the store time of its
    last message (0 if it holds none)."""
    total = len(data)
    if total > segment_room_bytes:
        raise ReplicationGapError(
            f"{total} bytes at {position} do not fit the {segment_room_bytes} bytes left in "
            f"the segment: do master and follower use the same segment_size_bytes?")
    cursor = 0
    last_message = -1
    unpack = _SIZE_AND_MAGIC.unpack_from
    while cursor < total:
        if total - cursor < record.BLANK_SIZE_BYTES:
            raise _not_whole(position, cursor, "a cut record head")
        size, magic = unpack(data, cursor)
        if magic == record.MAGIC_BLANK:
            if cursor + size != segment_room_bytes or size != total - cursor:
                raise _not_whole(position, cursor, "a BLANK record that does not end the "
                                                   "segment")
        elif magic not in _MESSAGE_MAGICS:
            raise _not_whole(position, cursor, f"magic {magic & 0xFFFFFFFF:#x}")
        elif size < _HEAD_BYTES_MIN or cursor + size > total:
            raise _not_whole(position, cursor, f"a record of {size} bytes")
        else:
            (physical,) = _PHYSICAL_OFFSET.unpack_from(data, cursor + _PHYSICAL_OFFSET_AT)
            if physical != position + cursor:
                raise _not_whole(position, cursor, f"PHYSICALOFFSET {physical}")
            last_message = cursor
        cursor += size
    if last_message < 0:
        return 0
    (sysflag,) = _SYSFLAG.unpack_from(data, last_message + _SYSFLAG_AT)
    at = _STORE_TIMESTAMP_AT[bool(sysflag & record.SysFlag.BORN_HOST_V6)]
    (store_timestamp_ms,) = _TIMESTAMP.unpack_from(data, last_message + at)
    return int(store_timestamp_ms)


def _not_whole(position: int, cursor: int, what: str) -> ReplicationGapError:
    return ReplicationGapError(f"the chunk at {position} is not whole records: {what} at "
                               f"{position + cursor}")
