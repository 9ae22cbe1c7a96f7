"""Read-only access to a commit log directory, for readers that do not own the writer.

Dispatch (reput) and, later, the indexer and pull-notifier processes read the commit log
through this, never through the writer's in-memory segments: it maps each segment file
read-only on first use.  What is safe to read is not known here: the caller passes the
readable end it was told (in-process, the store's committed position; across processes, the
position the writer publishes).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from pathlib import Path

from ..format.volume import offset_file_name


class CommitLogReader:
    def __init__(self, directory: Path, *, segment_size_bytes: int) -> None:
        self.directory = directory
        self.segment_size_bytes = segment_size_bytes
        self._mappings: dict[int, mmap.mmap] = {}
        self._lock = threading.Lock()

    def segment(self, position: int) -> tuple[mmap.mmap, int] | None:
        """(read-only mapping of the segment holding `position`, its start), or None if the
        file does not exist (deleted by retention, or not created yet)."""
        start = position - position % self.segment_size_bytes
        mapping = self._mappings.get(start)
        if mapping is None:
            with self._lock:
                mapping = self._mappings.get(start) or self._map(start)
            if mapping is None:
                return None
        return mapping, start

    def _map(self, start: int) -> mmap.mmap | None:
        path = self.directory / offset_file_name(start)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            if os.fstat(fd).st_size != self.segment_size_bytes:
                return None  # still being created (it is renamed into place at full size)
            mapping = mmap.mmap(fd, self.segment_size_bytes, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self._mappings[start] = mapping
        return mapping

    def forget_before(self, position: int) -> None:
        """Unmap segments that end at or before `position` (dispatch moved past them)."""
        with self._lock:
            for start in [s for s in self._mappings if s + self.segment_size_bytes <= position]:
                with contextlib.suppress(BufferError):  # a view is still out: GC unmaps it
                    self._mappings.pop(start).close()

    def close(self) -> None:
        self.forget_before(1 << 62)
