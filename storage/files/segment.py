"""One commit log segment: a `MappedFile` that may append into a pooled write buffer.

    commitlog/<20-digit start position>

With the transient store pool on, a new segment borrows a buffer: appends go there, and
`commit` copies [committed, written) into the file with os.pwrite (which releases the GIL), so

* written: appended, into the mapping or (pool on) into the borrowed write buffer;
* committed: present in the file's pages (pool on: copied by `commit`; pool off: = written);
* readers see committed bytes only (RocketMQ: readPosition = committed with a writeBuffer).

The buffer goes back to the pool once the segment is fully committed.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from .mapped_file import MappedFile, able_to_sync


class CommitLogSegment(MappedFile):
    """A segment file, its mapping, and (pool on) its borrowed write buffer."""

    SIZE_SETTING = "segment_size_bytes"

    def __init__(self, *, path: Path, start_position: int, size_bytes: int, fd: int,
                 mapping: mmap.mmap) -> None:
        super().__init__(path=path, start_position=start_position, size_bytes=size_bytes,
                         fd=fd, mapping=mapping)
        self.write_buffer: mmap.mmap | None = None
        self.write_target: mmap.mmap = mapping
        """Where appends go: the pool buffer while this segment holds one, else the mapping."""

    @property
    def read_position(self) -> int:
        return self.committed_position if self.write_buffer is not None else self.written_position

    def attach_write_buffer(self, buffer: mmap.mmap) -> None:
        """Pool on: appends to this (new, empty) segment go to `buffer` until committed."""
        assert self.written_position == 0
        assert self.write_buffer is None
        assert len(buffer) == self.size_bytes
        self.write_buffer = buffer
        self.write_target = buffer

    def set_positions(self, position: int) -> None:
        assert self.write_buffer is None, "recovery never sees a pooled segment"
        super().set_positions(position)

    def commit(self, *, pages_min: int) -> tuple[bool, mmap.mmap | None]:
        """Copy [committed, written) from the write buffer into the file.

        Returns (moved, buffer to return to the pool once fully committed).  Only the commit
        service and close() call this, serialised by the segment queue's commit lock.
        """
        buffer = self.write_buffer
        if buffer is None:
            moved = self.committed_position != self.written_position
            self.committed_position = self.written_position
            return moved, None
        written_end = self.written_position
        committed = self.committed_position
        if not able_to_sync(done=committed, current=written_end,
                            full=written_end == self.size_bytes, pages_min=pages_min):
            return False, None
        with memoryview(buffer) as view:
            position = committed
            while position < written_end:
                written = os.pwrite(self.fd, view[position:written_end], position)
                assert written > 0
                position += written
        self.committed_position = written_end
        if written_end == self.size_bytes:
            self.write_buffer = None
            self.write_target = self.mapping
            return True, buffer
        return True, None
