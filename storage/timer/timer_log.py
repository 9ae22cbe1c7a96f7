"""`TimerLog`: the append-only log of timer units that the wheel's slots chain through.

    <store directory>/timerlog/<20-digit position>    files of `file_size_bytes` each
                                                       (RocketMQ `mappedFileSizeTimerLog`)

Unit layout (RocketMQ `TimerLog.UNIT_SIZE`), big-endian, 52 bytes:

| offset | size | field                                                                  |
|--------|------|------------------------------------------------------------------------|
| 0      | 4    | size = 52                                                              |
| 4      | 8    | prev_position: the previous unit of the same slot, -1 = none           |
| 12     | 4    | magic: bit 0 DEFAULT (1), bit 1 ROLL (2), bit 2 DELETE (4)             |
| 16     | 8    | write_time_ms: the enqueue write time (a multiple of the precision)    |
| 24     | 4    | delay_ms: slot time - write_time_ms (int32)                            |
| 28     | 8    | commitlog_position: the `rmq_sys_wheel_timer` record                   |
| 36     | 4    | record_size_bytes: its size                                            |
| 40     | 4    | topic_hash: Java hash of its `REAL_TOPIC` (0 if none; metrics only)    |
| 44     | 8    | reserved = 0                                                           |
|        | 52   | total                                                                  |

A unit is valid iff size = 52 and `magic | 0xF == 0xF`.  Where a unit and 16 bytes no longer
fit in a file, a blank record ends it (size = the bytes left, 8 zero bytes, magic
0xCBD43194 at offset 12, the commit log's blank magic) and the next unit opens the next file.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ..errors import StoreFormatError
from ..files.mapped_file import last_nonzero_end
from ..format.volume import offset_file_name, parse_offset_file_name

DIRECTORY_NAME = "timerlog"
UNIT = struct.Struct(">iqiqiqiiq")
UNIT_SIZE_BYTES = 52
assert UNIT.size == UNIT_SIZE_BYTES
BLANK = struct.Struct(">iqi")
BLANK_SIZE_BYTES = 16
assert BLANK.size == BLANK_SIZE_BYTES
BLANK_MAGIC = 0xCBD43194 - (1 << 32)
"""RocketMQ's `BLANK_MAGIC_CODE` as the signed int it writes."""
MAGIC_DEFAULT = 1
MAGIC_ROLL = 2
MAGIC_DELETE = 4
MAGIC_BITS = 0xF


class TimerUnit(NamedTuple):
    prev_position: int
    magic: int
    write_time_ms: int
    delay_ms: int
    commitlog_position: int
    record_size_bytes: int
    topic_hash: int

    @property
    def slot_time_ms(self) -> int:
        return self.write_time_ms + self.delay_ms

    @property
    def rolled(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)


class TimerLog:
    """Use `TimerLog.open(directory, file_size_bytes=)` then `recover(from_position)`."""

    def __init__(self, directory: Path, *, file_size_bytes: int) -> None:
        assert file_size_bytes >= UNIT_SIZE_BYTES + BLANK_SIZE_BYTES
        self.directory = directory
        self.file_size_bytes = file_size_bytes
        self._files: dict[int, tuple[int, mmap.mmap]] = {}
        """Start position -> (fd, mapping)."""
        self.end_position = 0
        self.flushed_position = 0

    @classmethod
    def open(cls, store_directory: Path, *, file_size_bytes: int) -> TimerLog:
        directory = store_directory / DIRECTORY_NAME
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, file_size_bytes=file_size_bytes)
        for path in sorted(directory.iterdir()):
            start = parse_offset_file_name(path.name)
            if start is None:
                continue
            if start % file_size_bytes or path.stat().st_size != file_size_bytes:
                raise StoreFormatError(f"{path}: not a timer log file of file_size_bytes="
                                       f"{file_size_bytes} (timer_log_file_size_bytes)")
            log._map(start)
        return log

    def _map(self, start: int) -> mmap.mmap:
        held = self._files.get(start)
        if held is not None:
            return held[1]
        path = self.directory / offset_file_name(start)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if os.fstat(fd).st_size == 0:
            os.ftruncate(fd, self.file_size_bytes)
        mapping = mmap.mmap(fd, self.file_size_bytes, mmap.MAP_SHARED)
        self._files[start] = (fd, mapping)
        return mapping

    def _locate(self, position: int) -> tuple[mmap.mmap | None, int]:
        start = position - position % self.file_size_bytes
        held = self._files.get(start)
        return (None if held is None else held[1]), position - start

    # -- recovery ------------------------------------------------------------------------
    def scan(self, from_position: int) -> Iterator[tuple[int, TimerUnit]]:
        """Every valid unit from `from_position` (a unit or file boundary) on, with its
        position, up to the first place that holds none."""
        position = from_position
        while True:
            mapping, at = self._locate(position)
            if mapping is None or at + UNIT_SIZE_BYTES > self.file_size_bytes:
                return
            size, _, magic = BLANK.unpack_from(mapping, at)
            if magic == BLANK_MAGIC and size == self.file_size_bytes - at:
                position += size
                continue
            if size != UNIT_SIZE_BYTES or magic | MAGIC_BITS != MAGIC_BITS or magic == 0:
                return
            yield position, self._decode(mapping, at)
            position += UNIT_SIZE_BYTES

    def recover(self, from_position: int) -> list[tuple[int, TimerUnit]]:
        """Find the end from `from_position` (the last synced position less one file, as
        RocketMQ does), zero the dirty tail and drop files past it; the units found."""
        start = max(0, from_position - self.file_size_bytes)
        start -= start % self.file_size_bytes
        found = list(self.scan(start))
        end = found[-1][0] + UNIT_SIZE_BYTES if found else start
        self._cut(end)
        return found

    def _cut(self, end: int) -> None:
        for start in sorted(self._files):
            fd, mapping = self._files[start]
            if start >= end and start > 0:
                mapping.close()
                os.close(fd)
                del self._files[start]
                (self.directory / offset_file_name(start)).unlink()
            elif start <= end < start + self.file_size_bytes:
                tail = end - start
                dirty_end = last_nonzero_end(mapping, tail)
                if dirty_end > tail:
                    mapping[tail:dirty_end] = bytes(dirty_end - tail)
                    os.fdatasync(fd)
        self.end_position = end
        self.flushed_position = end

    # -- append and read -------------------------------------------------------------------
    def append(self, unit: TimerUnit) -> int:
        """Write `unit` at the end; its position."""
        assert unit.magic | MAGIC_BITS == MAGIC_BITS
        assert unit.magic & MAGIC_DEFAULT
        assert -(1 << 31) <= unit.delay_ms < 1 << 31, "a slot is at most 2^31 ms ahead"
        assert unit.prev_position < self.end_position
        mapping, at = self._locate(self.end_position)
        if at + UNIT_SIZE_BYTES + BLANK_SIZE_BYTES > self.file_size_bytes:
            assert mapping is not None
            left = self.file_size_bytes - at
            BLANK.pack_into(mapping, at, left, 0, BLANK_MAGIC)
            self.end_position += left
            mapping, at = self._locate(self.end_position)
        if mapping is None:
            mapping = self._map(self.end_position)
        position = self.end_position
        UNIT.pack_into(mapping, at, UNIT_SIZE_BYTES, *unit, 0)
        self.end_position += UNIT_SIZE_BYTES
        return position

    def unit(self, position: int) -> TimerUnit:
        assert 0 <= position < self.end_position, "a unit below the log's end"
        mapping, at = self._locate(position)
        assert mapping is not None
        return self._decode(mapping, at)

    @staticmethod
    def _decode(mapping: mmap.mmap, at: int) -> TimerUnit:
        size, prev, magic, write_ms, delay, position, record_size, topic_hash, _ = \
            UNIT.unpack_from(mapping, at)
        assert size == UNIT_SIZE_BYTES
        return TimerUnit(prev, magic, write_ms, delay, position, record_size, topic_hash)

    def flush(self) -> int:
        """Sync every file written since the last flush; the flushed position."""
        end = self.end_position
        first = self.flushed_position - self.flushed_position % self.file_size_bytes
        for start, (fd, _) in sorted(self._files.items()):
            if start + self.file_size_bytes > first and start < end:
                os.fdatasync(fd)
        self.flushed_position = end
        return end

    def close(self) -> None:
        for fd, mapping in self._files.values():
            mapping.close()
            os.close(fd)
        self._files.clear()
