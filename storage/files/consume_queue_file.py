"""One consume queue file: fixed 20-byte entries, written through the mapping.

    consumequeue/<topic>/<queue id>/<20-digit start byte position>

Entry layout (RocketMQ `ConsumeQueue`, big-endian):

    @0   physical_offset   int64   the record's commit log position
    @8   size              int32   the record's TOTALSIZE
    @12  tags_code         int64   Java String.hashCode of TAGS (0 if none; DAMAGED_TAGS_CODE
                                   for an offset whose record damage took)
    = 20 bytes

Entry n of the queue (its queue offset n) is at byte n*20 of the queue, so at position
n*20 % file_size of the file named (n*20 - n*20 % file_size).  Entries are written through
the mapping (RocketMQ issue #3585 part J: its FileChannel writes capped consume rates at 600
queues), and read in bulk through a numpy structured view.

A file has its full length from creation (RocketMQ loads only files of the configured size)
but is sparse: blocks are reserved `allocate_step_bytes` at a time, ahead of the entries
(posix_fallocate, then the range is mapped in without the GIL).  A store into a hole of a
shared mapping on a full disk is a SIGBUS that kills the process; a failed fallocate is an
OSError (ENOSPC) raised before the entry is written, which dispatch turns into a stall and a
retry.  Reserving a range twice (after a reopen nothing is known of what is reserved) costs
one syscall and nothing on disk.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from ..config import PAGE_SIZE_BYTES
from ..format.dispatch_scan import DispatchRecord
from .mapped_file import MappedFile
from .preallocate import populate_for_write

ENTRY = struct.Struct(">qiq")
ENTRY_SIZE_BYTES = 20
assert ENTRY.size == ENTRY_SIZE_BYTES

ENTRY_DTYPE = np.dtype([("physical_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert ENTRY_DTYPE.itemsize == ENTRY_SIZE_BYTES

FILLER_SIZE = 0x7FFFFFFF
"""RocketMQ fills the slots before a queue's first entry with (0, Integer.MAX_VALUE, 0)."""

DAMAGED_TAGS_CODE = 0x4D51_4441_4D41_4745
"""b"MQDAMAGE": the tags code of a *damaged entry*, one written for a queue offset whose
record was lost in damaged bytes of the commit log (dispatch/dispatcher.py).  Outside the
int32 range of Java hash codes, positive so RocketMQ never takes it for a consume queue
extension address: a read of such an entry answers MESSAGE_CORRUPT (reads/get.py)."""


@overload
def is_filler(physical_offset: int, size: int) -> bool: ...


@overload
def is_filler(physical_offset: npt.NDArray[Any],
              size: npt.NDArray[Any]) -> npt.NDArray[np.bool_]: ...


def is_filler(physical_offset: Any, size: Any) -> Any:
    """The one filler test, for one entry's fields or for numpy columns of many."""
    return (physical_offset == 0) & (size == FILLER_SIZE)

Entries = npt.NDArray[np.void]


class ConsumeQueueFile(MappedFile):
    """A consume queue file; positions are byte positions, always multiples of 20."""

    SIZE_SETTING = "consume_queue_file_size_bytes"

    allocated_position = 0
    """Blocks below this position are reserved and mapped in (0 after a reopen: unknown)."""

    allocate_step_bytes = PAGE_SIZE_BYTES
    """How much is reserved at a time (the queue sets `consume_queue_allocate_step_bytes`)."""

    def append(self, *, physical_offset: int, size_bytes: int, tags_code: int) -> None:
        """Write the next entry at `written_position` (the caller checked there is room);
        reserves the next step of blocks first if the entry reaches past what is reserved
        (a full disk raises OSError here, and nothing is written)."""
        position = self.written_position
        assert position % ENTRY_SIZE_BYTES == 0
        assert position + ENTRY_SIZE_BYTES <= self.size_bytes
        if position + ENTRY_SIZE_BYTES > self.allocated_position:
            self.allocate_through(position + ENTRY_SIZE_BYTES)
        ENTRY.pack_into(self.mapping, position, physical_offset, size_bytes, tags_code)
        self.written_position = position + ENTRY_SIZE_BYTES
        self.committed_position = self.written_position

    def append_streak(self, records: Sequence[DispatchRecord], first: int, count: int,
                      tags_codes: Sequence[int] | None) -> int:
        """Write the entries of `records[first:first + count]` from `written_position` on,
        while their queue offsets follow one another; `tags_codes[i]` is the tags code of
        `records[first + i]` (None: all 0).  Returns how many were written.  The caller
        checked the first is the queue's next entry and that all `count` fit below
        `allocated_position` (nothing is reserved here)."""
        position = self.written_position
        assert position + count * ENTRY_SIZE_BYTES <= min(self.allocated_position,
                                                          self.size_bytes)
        assert tags_codes is None or len(tags_codes) >= count
        written = 0
        if count > 0:
            pack, mapping = ENTRY.pack_into, self.mapping
            queue_offset = records[first].queue_offset
            for index in range(first, first + count):
                whole = records[index]
                if whole.queue_offset != queue_offset + written:
                    break  # a hole: storage/dispatch/dispatcher.py puts it on its own
                pack(mapping, position, whole.physical_offset, whole.total_size,
                     tags_codes[written] if tags_codes is not None else 0)
                position += ENTRY_SIZE_BYTES
                written += 1
        self.written_position = position
        self.committed_position = position
        return written

    def allocate_through(self, end_position: int) -> None:
        """Reserve blocks from the page of `written_position` (or the reserved end, if
        further) up to at least `end_position`, a whole step, and map them in."""
        assert 0 < end_position <= self.size_bytes
        step = self.allocate_step_bytes
        assert step > 0
        assert step % PAGE_SIZE_BYTES == 0
        start = max(self.allocated_position, self.written_position)
        start -= start % PAGE_SIZE_BYTES
        end = min(self.size_bytes, max(end_position, start + step))
        os.posix_fallocate(self.fd, start, end - start)
        populate_for_write(self.mapping, start_position=start, end_position=end)
        self.allocated_position = end
        assert self.allocated_position >= end_position

    def fill(self, *, until_position: int) -> None:
        """Write filler entries from `written_position` up to `until_position` (a queue whose
        first entry does not start at offset 0)."""
        assert until_position % ENTRY_SIZE_BYTES == 0
        while self.written_position < until_position:
            self.append(physical_offset=0, size_bytes=FILLER_SIZE, tags_code=0)

    def entry(self, position: int) -> tuple[int, int, int]:
        assert 0 <= position <= self.size_bytes - ENTRY_SIZE_BYTES
        physical_offset, size_bytes, tags_code = ENTRY.unpack_from(self.mapping, position)
        return physical_offset, size_bytes, tags_code

    def entries(self, start_position: int, end_position: int) -> Entries:
        """A zero-copy numpy view of the entries in [start, end); hold the file while using
        it (the view keeps the mapping exported, so the file cannot close under it)."""
        assert start_position % ENTRY_SIZE_BYTES == 0
        assert end_position % ENTRY_SIZE_BYTES == 0
        count = (end_position - start_position) // ENTRY_SIZE_BYTES
        return np.frombuffer(self.mapping, dtype=ENTRY_DTYPE, count=count,
                             offset=start_position)

    def valid_end(self, *, previous_physical_offset: int = 0) -> int:
        """Recovery: the position of the first entry that cannot be one the indexer wrote:
        an offset < 0 or a size ≤ 0 (the never-written tail of a file is zeros), or an
        offset below the entry before it (entries are written in log order; damaged entries
        of one damage share an offset).  `previous_physical_offset` is the last entry of the
        file before this one."""
        view = self.entries(0, self.size_bytes)
        offsets = view["physical_offset"]
        filler = is_filler(offsets, view["size"])
        previous = np.concatenate(([previous_physical_offset], offsets[:-1]))
        valid = filler | ((offsets >= 0) & (view["size"] > 0) & (offsets >= previous))
        invalid = np.flatnonzero(~valid)
        count = int(invalid[0]) if invalid.size else len(view)
        del view, offsets, filler, previous, valid
        return count * ENTRY_SIZE_BYTES
