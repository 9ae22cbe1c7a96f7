"""`CommitLogReader`: the commit log of a directory, mapped read-only, for the readers that
do not own the writer's in-memory segments: the indexer's dispatch and the store view's
reads (reads/log_view.py), in the writer's process or in another.

Each segment file is opened `O_RDONLY` and mapped `ACCESS_READ` as a `CommitLogSegment` on
first use, so reads/get.py serves it exactly as it serves the writer's own segments, with
the same reference counting: a reader `hold()`s a segment while it uses the mapping, and a
segment forgotten meanwhile (`forget_before`, after retention moved the log's start) is
unmapped only when that reader releases it (an unlinked file's pages live as long as a
mapping does).  What is safe to read is not known here: the caller bounds its reads by the
committed position it was told (in-process, the segment list's; across processes, the one
the writer publishes in `positions`).

A segment file appears under its 20-digit name only at full size (the allocator prepares it
under `.creating` and renames it), so a file of another size is a configuration mismatch.
Thread-safe: the dispatch thread maps, another thread may forget.
"""

from __future__ import annotations

import mmap
import os
import threading
from pathlib import Path

from ..errors import StoreFormatError
from ..files.segment import CommitLogSegment
from ..format.volume import offset_file_name


class CommitLogReader:
    def __init__(self, directory: Path, *, segment_size_bytes: int) -> None:
        self.directory = directory
        self.segment_size_bytes = segment_size_bytes
        self._segments: dict[int, CommitLogSegment] = {}
        self._lock = threading.Lock()

    def find(self, position: int) -> CommitLogSegment | None:
        """The segment holding `position`, mapped read-only, or None if its file does not
        exist (deleted by retention, or not created yet).  Its positions are the whole file;
        the caller bounds what it reads."""
        start = position - position % self.segment_size_bytes
        segment = self._segments.get(start)
        if segment is None:
            with self._lock:
                segment = self._segments.get(start) or self._map(start)
        return segment

    def _map(self, start: int) -> CommitLogSegment | None:
        path = self.directory / offset_file_name(start)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            size_bytes = os.fstat(fd).st_size
            if size_bytes != self.segment_size_bytes:
                raise StoreFormatError(f"{path}: {size_bytes} bytes, but segment_size_bytes is "
                                       f"{self.segment_size_bytes}; read it with the writer's "
                                       f"settings")
            mapping = mmap.mmap(fd, size_bytes, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(fd)
            raise
        segment = CommitLogSegment(path=path, start_position=start, size_bytes=size_bytes,
                                   fd=fd, mapping=mapping)
        segment.set_positions(size_bytes)
        self._segments[start] = segment
        return segment

    def forget_before(self, position: int) -> int:
        """Drop the segments that end at or before `position` (the log's start moved past
        them); one a reader holds is unmapped when it is released.  Returns how many."""
        with self._lock:
            gone = [start for start in self._segments
                    if start + self.segment_size_bytes <= position]
            for start in gone:
                self._segments.pop(start).close()
        return len(gone)

    @property
    def mapped_count(self) -> int:
        return len(self._segments)

    def close(self) -> None:
        with self._lock:
            for segment in self._segments.values():
                segment.close()
            self._segments.clear()
