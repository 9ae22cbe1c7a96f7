"""`LogView`: the commit log of a directory another process writes, mapped read-only.

A view (the pull-notifier) reads records the writer appended, never writes, and never
takes the writer's lock.  Each segment it touches is opened `O_RDONLY` and mapped
`ACCESS_READ` as a `CommitLogSegment`, so `reads.py` serves it exactly as it serves the
writer's own segments, with the same reference counting:

* `committed_position` is the writer's published committed position (`positions`): records below
  it are whole.  A segment's `read_position` is raised to it as it moves, never past it.
* Retention deletes segment files; `forget_before(min_position)` drops the mappings below
  the log's new start.  A segment a reader still holds stays mapped until it is released
  (an unlinked file's pages live as long as a mapping does), so a held read is never broken.
* A segment file appears under its 20-digit name only at full size (the writer prepares it
  under `.creating` and renames it), so a file of another size is a configuration mismatch.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from ..errors import StoreFormatError
from ..files.segment import CommitLogSegment
from ..format.volume import offset_file_name


class LogView:
    """Read-only segments by start position; one thread (the caller's) uses it."""

    def __init__(self, directory: Path, *, segment_size_bytes: int) -> None:
        self.directory = directory
        self.segment_size_bytes = segment_size_bytes
        self.min_position = 0
        self.committed_position = 0
        """Exclusive end of what the writer published as committed."""
        self._segments: dict[int, CommitLogSegment] = {}

    def update(self, *, min_position: int, committed_position: int) -> None:
        """Take the writer's latest published start and committed end.  The end may move
        back only after a writer's recovery cut the log (`cut_to`); here it only grows."""
        assert min_position >= 0
        self.committed_position = max(self.committed_position, committed_position)
        if min_position > self.min_position:
            self.min_position = min_position
            self.forget_before(min_position)

    def cut_to(self, end_position: int) -> None:
        """A new writer recovered the log to `end_position`, below what was readable."""
        assert end_position <= self.committed_position
        self.committed_position = end_position
        for start, segment in self._segments.items():
            readable = min(self.segment_size_bytes, max(0, end_position - start))
            if readable < segment.written_position:
                segment.set_positions(readable)

    def find(self, position: int) -> CommitLogSegment | None:
        """The segment holding `position` with its readable part raised to `committed_position`,
        or None if `position` is outside [min_position, committed_position) or its file is gone."""
        if not self.min_position <= position < self.committed_position:
            return None
        start = position - position % self.segment_size_bytes
        segment = self._segments.get(start)
        if segment is None:
            segment = self._map(start)
            if segment is None:
                return None
        readable = min(self.segment_size_bytes, self.committed_position - start)
        if readable > segment.written_position:
            segment.set_positions(readable)
        return segment

    def _map(self, start: int) -> CommitLogSegment | None:
        path = self.directory / offset_file_name(start)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None  # deleted by retention (or never written)
        try:
            size_bytes = os.fstat(fd).st_size
            if size_bytes != self.segment_size_bytes:
                raise StoreFormatError(f"{path}: {size_bytes} bytes, but segment_size_bytes is "
                                       f"{self.segment_size_bytes}; the view must use the "
                                       f"writer's settings")
            mapping = mmap.mmap(fd, size_bytes, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(fd)
            raise
        segment = CommitLogSegment(path=path, start_position=start, size_bytes=size_bytes,
                                   fd=fd, mapping=mapping)
        self._segments[start] = segment
        return segment

    def forget_before(self, position: int) -> int:
        """Drop the mappings of segments that end at or before `position`; a segment still
        held by a reader is unmapped when that reader releases it.  Returns how many."""
        gone = [start for start in self._segments
                if start + self.segment_size_bytes <= position]
        for start in gone:
            self._segments.pop(start).close()
        return len(gone)

    @property
    def mapped_count(self) -> int:
        return len(self._segments)

    def close(self) -> None:
        for segment in self._segments.values():
            segment.close()
        self._segments.clear()
