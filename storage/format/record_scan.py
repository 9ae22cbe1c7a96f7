"""Finding the next whole record after damaged bytes (resynchronising a walk of a segment).

A record that fails its check (bad magic, sizes, position or body CRC) says nothing
trustworthy about where the next one starts: its TOTALSIZE may be the damaged field.  The
next record is found by its own evidence instead:

    @4   MAGICCODE       0xDAA320A7 or 0xDAA320AB (a BLANK: 0xCBD43194)
    @28  PHYSICALOFFSET  its own position in the log

Candidates are the positions of a magic value (found with `find`, at C speed, on the segment
or its mapping), four bytes back; a candidate is a record only if `check_record` accepts it
there with its body CRC, which includes PHYSICALOFFSET naming that very position.  A random
match of all of that inside damaged bytes or a message body would need a 4-byte magic, an
8-byte position equal to where it lies, sizes that add up and a matching CRC-32.  A BLANK is
accepted where it covers exactly the rest of the segment.
"""

from __future__ import annotations

import dataclasses
import struct

from . import record

_MAGIC = struct.Struct(">i")
_MAGIC_PATTERNS = tuple(_MAGIC.pack(magic)
                        for magic in (record.MAGIC_V1, record.MAGIC_V2, record.MAGIC_BLANK))
_MAGIC_AT = 4
"""MAGICCODE follows the 4-byte TOTALSIZE."""


@dataclasses.dataclass(frozen=True)
class Damage:
    """Bytes of the log that hold no valid record where one was due."""

    position: int
    end_position: int
    """Where valid records resume (exclusive end of the damage)."""
    reason: str

    def __str__(self) -> str:
        return f"[{self.position}, {self.end_position}): {self.reason}"


def find_record(buffer: record.ReadableBuffer, start: int, end: int, *, limit: int,
                segment_start: int) -> int | None:
    """The first position in [start, end) where a whole, CRC-valid record (or the segment's
    BLANK) begins, or None.  `limit` is where the segment's bytes end; `segment_start` the
    segment's position in the log (PHYSICALOFFSET is checked against it)."""
    assert 0 <= start <= end <= limit
    search_from = start + _MAGIC_AT
    while search_from < end + _MAGIC_AT:
        hit = _next_magic(buffer, search_from, min(end + _MAGIC_AT, limit))
        if hit is None:
            return None
        candidate = hit - _MAGIC_AT
        check = record.check_record(buffer, candidate, limit=limit,
                                    expected_physical_offset=segment_start + candidate,
                                    verify_crc=True)
        if check.status in (record.RecordCheck.OK, record.RecordCheck.BLANK):
            return candidate
        search_from = hit + 1
    return None


def _next_magic(buffer: record.ReadableBuffer, start: int, end: int) -> int | None:
    find = buffer.find  # type: ignore[union-attr]  # bytes, bytearray and mmap have it
    hits = [hit for pattern in _MAGIC_PATTERNS if (hit := find(pattern, start, end)) >= 0]
    return min(hits) if hits else None
