"""Small files one process publishes and others poll: `positions` and `dispatched`.

The writer publishes its watermarks in `positions`; the indexer publishes how far its consume
queues are synced in `dispatched`.  Readers are other processes that map the same file and
read it at any instant, including in the middle of a publish, so a reader must never take a
half-written value for a real one.

File: one 4096-byte page holding two slots at 0 and 128 (big-endian):

    offset  size  field
    0       4     magic           b"MQWM"
    4       2     version         1
    6       2     field count     n ≤ 12
    8       8     sequence        publish counter (the slot written is sequence % 2)
    16      8·n   fields          signed 64-bit values, named by the file's kind
    112     4     crc32           zlib.crc32 of bytes [0, 112)
    116     8     sequence again  written last, in its own store

A publish fills the slot the previous publish did not touch, with three stores in program
order: the body [0, 112), the CRC, then the trailing sequence.  A reader copies both slots and
accepts a slot only if magic and version match, the CRC matches and the trailing sequence
equals the leading one; it takes the accepted slot with the higher sequence.  A publish in
progress can tear only the slot it is writing, and the other slot still holds the previous
complete publish; a reader would need the writer to lap it twice inside one 256-byte copy to
see both torn, and then it retries (`read_attempts_max`).  So a reader gets the newest or the
previous publish, never a mix.  Nothing is fsynced: the values are a hint recomputed at every
start, and their loss on a machine crash costs only a re-read (a file a power loss left short
is made anew by its owner).
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from pathlib import Path
from typing import ClassVar

from ..errors import StoreFormatError

WATERMARK_FILE_SIZE_BYTES = 4096
SLOT_SIZE_BYTES = 128
FIELDS_MAX = 12
MAGIC = b"MQWM"
VERSION = 1
_HEAD = struct.Struct(">4sHHq")
_BODY_SIZE_BYTES = _HEAD.size + 8 * FIELDS_MAX  # 112
_CRC = struct.Struct(">I")
_TAIL = struct.Struct(">q")
_TAIL_POSITION = _BODY_SIZE_BYTES + _CRC.size  # 116
assert _TAIL_POSITION + _TAIL.size <= SLOT_SIZE_BYTES


class WatermarkFile:
    """Base of the two kinds: subclasses name their `FIELDS` (at most 12 int64 values).

    `publish(**values)` is for the one process that owns the file (callers serialize their
    publishes); `read()` is for anyone, any time, from any process."""

    FIELDS: ClassVar[tuple[str, ...]] = ()
    read_attempts_max = 100

    def __init__(self, path: Path, *, writable: bool) -> None:
        assert 0 < len(self.FIELDS) <= FIELDS_MAX
        self.path = path
        self.writable = writable
        self._fields = struct.Struct(f">{len(self.FIELDS)}q")
        if writable and (not path.exists()
                         or path.stat().st_size < WATERMARK_FILE_SIZE_BYTES):
            _create(path)  # new, or a power loss left it short: the values are only hints
        fd = os.open(path, (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)
        try:
            if os.fstat(fd).st_size < WATERMARK_FILE_SIZE_BYTES:
                raise StoreFormatError(f"{path}: {os.fstat(fd).st_size} bytes, a watermark "
                                       f"file has {WATERMARK_FILE_SIZE_BYTES}")
            access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
            self._map = mmap.mmap(fd, WATERMARK_FILE_SIZE_BYTES, access=access)
        finally:
            os.close(fd)
        found = self.read()
        self._sequence = found[0] if found is not None else 0

    def publish(self, **values: int) -> int:
        """Write `values` (every field, by name) as the next publish; returns its sequence."""
        assert self.writable, f"{self.path} is open read-only"
        assert set(values) == set(self.FIELDS), f"fields {sorted(values)} != {self.FIELDS}"
        sequence = self._sequence + 1
        slot = bytearray(_BODY_SIZE_BYTES)
        _HEAD.pack_into(slot, 0, MAGIC, VERSION, len(self.FIELDS), sequence)
        self._fields.pack_into(slot, _HEAD.size, *(values[name] for name in self.FIELDS))
        base = (sequence % 2) * SLOT_SIZE_BYTES
        mapping = self._map
        mapping[base:base + _BODY_SIZE_BYTES] = slot
        _CRC.pack_into(mapping, base + _BODY_SIZE_BYTES, zlib.crc32(slot))
        _TAIL.pack_into(mapping, base + _TAIL_POSITION, sequence)
        self._sequence = sequence
        return sequence

    def read(self) -> tuple[int, dict[str, int]] | None:
        """(sequence, values) of the newest complete publish; None if nothing was published.
        Raises StoreFormatError if slots stay torn or foreign after every attempt."""
        for _ in range(self.read_attempts_max):
            both = self._map[:2 * SLOT_SIZE_BYTES]
            if not any(both):
                return None
            slots = [self._decode(both[i * SLOT_SIZE_BYTES:(i + 1) * SLOT_SIZE_BYTES])
                     for i in range(2)]
            valid = [slot for slot in slots if slot is not None]
            if valid:
                sequence, values = max(valid, key=lambda slot: slot[0])
                return sequence, dict(zip(self.FIELDS, values, strict=True))
        raise StoreFormatError(f"{self.path}: no complete slot after {self.read_attempts_max} "
                               f"reads (not a {type(self).__name__} file?)")

    def _decode(self, slot: bytes) -> tuple[int, tuple[int, ...]] | None:
        magic, version, count, sequence = _HEAD.unpack_from(slot, 0)
        if magic != MAGIC or version != VERSION or count != len(self.FIELDS):
            return None
        (crc,) = _CRC.unpack_from(slot, _BODY_SIZE_BYTES)
        if crc != zlib.crc32(slot[:_BODY_SIZE_BYTES]):
            return None
        (tail,) = _TAIL.unpack_from(slot, _TAIL_POSITION)
        if tail != sequence:
            return None
        return sequence, self._fields.unpack_from(slot, _HEAD.size)

    def close(self) -> None:
        self._map.close()


def _create(path: Path) -> None:
    """Create the file at full size under a temporary name and rename it into place: a reader
    polling for it finds either nothing or the whole page, never a short file."""
    temporary = path.with_name(path.name + ".creating")
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.ftruncate(fd, WATERMARK_FILE_SIZE_BYTES)
    finally:
        os.close(fd)
    os.replace(temporary, path)


class PositionsFile(WatermarkFile):
    """`positions`: the writer's watermarks.  A new `generation` starts at every writer open;
    `recovered_end_position` is where that writer's recovery found the log's valid end, so a
    reader that went further (before a crash) knows to cut back to it."""

    FIELDS = ("generation", "recovered_end_position", "min_position", "written_position",
              "committed_position", "flushed_position", "published_ms", "writer_pid")


class DispatchedFile(WatermarkFile):
    """`dispatched`: how far the indexer's consume queues are synced.  Every record before
    `synced_position` has its consume queue entry on disk, so the writer may take queue
    offsets from the consume queues below it and scan the log only from there."""

    FIELDS = ("synced_position", "dispatched_position", "writer_generation", "published_ms",
              "indexer_pid")
