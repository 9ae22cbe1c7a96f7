"""`LogView`: the commit log of a directory another process writes, as the store view reads
it: a `CommitLogReader` bounded by what the writer published.

* `committed_position` is the writer's published committed position (`positions`): records
  below it are whole.  A segment's readable part (`read_position`) is raised to it as it
  moves, never past it.
* `min_position` is the log's published start; segments below it are forgotten (a held one
  stays mapped until its reader releases it).
* `cut_to(end)`: a new writer recovered the log to `end`, below what was readable.

Not thread-safe: one thread (the notifier's event loop) makes every call.
"""

from __future__ import annotations

from pathlib import Path

from ..files.segment import CommitLogSegment
from ..log.reader import CommitLogReader


class LogView:
    def __init__(self, directory: Path, *, segment_size_bytes: int) -> None:
        self.reader = CommitLogReader(directory, segment_size_bytes=segment_size_bytes)
        self.segment_size_bytes = segment_size_bytes
        self.min_position = 0
        self.committed_position = 0
        """Exclusive end of what the writer published as committed."""
        self._readable: dict[int, CommitLogSegment] = {}

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
        for start, segment in self._readable.items():
            readable = min(self.segment_size_bytes, max(0, end_position - start))
            if readable < segment.written_position:
                segment.set_positions(readable)

    def find(self, position: int) -> CommitLogSegment | None:
        """The segment holding `position` with its readable part raised to the committed
        position, or None if `position` is outside [min_position, committed_position) or its
        file is gone."""
        if not self.min_position <= position < self.committed_position:
            return None
        start = position - position % self.segment_size_bytes
        segment = self._readable.get(start)
        if segment is None:
            segment = self.reader.find(position)
            if segment is None:
                return None
            segment.set_positions(0)
            self._readable[start] = segment
        readable = min(self.segment_size_bytes, self.committed_position - start)
        if readable > segment.written_position:
            segment.set_positions(readable)
        return segment

    def forget_before(self, position: int) -> int:
        """Forget the segments that end at or before `position`; returns how many."""
        for start in [s for s in self._readable if s + self.segment_size_bytes <= position]:
            del self._readable[start]
        return self.reader.forget_before(position)

    @property
    def mapped_count(self) -> int:
        return self.reader.mapped_count

    def close(self) -> None:
        self._readable.clear()
        self.reader.close()
