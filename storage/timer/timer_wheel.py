"""`TimerWheel`: one slot per precision step of time, each the head of a chain of timer units.

    <store directory>/timerwheel        slot_count x 32 bytes, mapped MAP_SHARED

`slot_count` is RocketMQ's 2 x `TIMER_WHEEL_TTL_DAY` (7) x 86,400 = 1,209,600 slots, so the
file is 38,707,200 bytes at any precision (a sparse file: only the slots ever used take
pages).  The slot of a time is `(time_ms // precision_ms) % slot_count`.

Slot layout (RocketMQ `TimerWheel`, `Slot`), big-endian:

| offset | size | field                                                              |
|--------|------|--------------------------------------------------------------------|
| 0      | 8    | time_units: the slot's time in precision units (ms // precision_ms) |
| 8      | 8    | first_position: timer log position of the slot's first unit, -1     |
| 16     | 8    | last_position: its newest unit, the head of the prev_position chain |
| 24     | 4    | unit_count: units in the slot (RocketMQ `num`)                      |
| 28     | 4    | magic: unused, 0                                                    |
|        | 32   | total                                                               |

Slots are never cleared after delivery: a slot whose `time_units` is not the time asked for
belongs to an earlier turn of the wheel and reads as empty.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import NamedTuple

import numpy

from ..errors import StoreFormatError

FILE_NAME = "timerwheel"
SLOT = struct.Struct(">qqqii")
SLOT_SIZE_BYTES = 32
assert SLOT.size == SLOT_SIZE_BYTES
TTL_DAYS = 7
"""RocketMQ's `TIMER_WHEEL_TTL_DAY`."""
SLOTS_TOTAL = TTL_DAYS * 86_400
"""RocketMQ's `slotsTotal` (604,800): the wheel holds twice as many slots."""
SLOT_COUNT = 2 * SLOTS_TOTAL
NO_POSITION = -1
SLOT_DTYPE = numpy.dtype([("time_units", ">i8"), ("first_position", ">i8"),
                          ("last_position", ">i8"), ("unit_count", ">i4"), ("magic", ">i4")])
assert SLOT_DTYPE.itemsize == SLOT_SIZE_BYTES


class Slot(NamedTuple):
    time_units: int
    first_position: int
    last_position: int
    unit_count: int
    magic: int = 0


class TimerWheel:
    """Use `TimerWheel.open(directory, precision_ms=)`; `close()` when done."""

    def __init__(self, path: Path, fd: int, mapping: mmap.mmap, *, precision_ms: int,
                 slot_count: int) -> None:
        assert precision_ms > 0
        assert len(mapping) == slot_count * SLOT_SIZE_BYTES
        self.path = path
        self._fd = fd
        self._mapping = mapping
        self.precision_ms = precision_ms
        self.slot_count = slot_count

    @classmethod
    def open(cls, directory: Path, *, precision_ms: int,
             slot_count: int = SLOT_COUNT) -> TimerWheel:
        """Open the wheel, creating it (sparse, all zero) if absent.  `StoreFormatError` if
        the file has another size."""
        path = directory / FILE_NAME
        size_bytes = slot_count * SLOT_SIZE_BYTES
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            actual = os.fstat(fd).st_size
            if actual == 0:
                os.ftruncate(fd, size_bytes)
                os.fdatasync(fd)
            elif actual != size_bytes:
                raise StoreFormatError(f"{path}: {actual} bytes; a wheel of {slot_count} "
                                       f"slots is {size_bytes}")
            mapping = mmap.mmap(fd, size_bytes, mmap.MAP_SHARED)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, mapping, precision_ms=precision_ms, slot_count=slot_count)

    def _index(self, time_ms: int) -> int:
        return (time_ms // self.precision_ms) % self.slot_count

    def slot(self, time_ms: int) -> Slot | None:
        """The slot of `time_ms` (a multiple of the precision), None if it holds no unit of
        this time (empty, or an earlier turn's)."""
        assert time_ms % self.precision_ms == 0, "slot times are multiples of the precision"
        held = Slot(*SLOT.unpack_from(self._mapping, self._index(time_ms) * SLOT_SIZE_BYTES))
        if held.time_units != time_ms // self.precision_ms or held.unit_count <= 0:
            return None
        assert held.first_position <= held.last_position
        return held

    def put_slot(self, time_ms: int, *, first_position: int, last_position: int,
                 unit_count: int) -> None:
        assert time_ms % self.precision_ms == 0
        assert 0 <= first_position <= last_position
        assert unit_count > 0
        SLOT.pack_into(self._mapping, self._index(time_ms) * SLOT_SIZE_BYTES,
                       time_ms // self.precision_ms, first_position, last_position, unit_count, 0)

    def last_position(self, time_ms: int) -> int:
        """The newest unit of the slot of `time_ms` (a new unit's prev_position), or
        NO_POSITION if it holds none."""
        held = self.slot(time_ms)
        return NO_POSITION if held is None else held.last_position

    def add(self, time_ms: int, position: int) -> None:
        """Chain the unit at `position` (written with prev_position = `last_position`) into
        the slot of `time_ms`."""
        held = self.slot(time_ms)
        if held is None:
            self.put_slot(time_ms, first_position=position, last_position=position, unit_count=1)
            return
        assert position > held.last_position, "units are appended in position order"
        self.put_slot(time_ms, first_position=held.first_position, last_position=position,
                      unit_count=held.unit_count + 1)

    def count_from(self, time_ms: int) -> int:
        """Units in the slots of `time_ms` and later (a scan of the whole wheel, ~50 ms)."""
        slots = numpy.frombuffer(self._mapping, dtype=SLOT_DTYPE)
        ahead = slots["time_units"] >= time_ms // self.precision_ms
        return int(slots["unit_count"][ahead].sum())

    def flush(self) -> None:
        """Sync the slots written since the last flush (dirty pages only)."""
        os.fdatasync(self._fd)

    def close(self) -> None:
        self._mapping.close()
        os.close(self._fd)
