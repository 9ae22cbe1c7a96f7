"""The ordered segments of one commit log and its absolute positions.

RocketMQ `MappedFileQueue`.  Absolute positions (bytes from the start of the log):

    min_position <= flushed_position <= committed_position <= written_position

`commit` and `flush` walk forward from where they stopped, one segment at a time, so a
record that rolled into a new segment is covered too.  Each is serialised by its own lock
(the background service and `close()` may both call them).
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable
from pathlib import Path

from ..files.segment import CommitLogSegment
from ..format.volume import (
    COMMITLOG_DIRECTORY,
    CREATING_DIRECTORY,
    CREATING_SUFFIX,
    creating_name,
    parse_offset_file_name,
)

ReturnBuffer = Callable[[mmap.mmap], None]


class SegmentList:
    def __init__(self, directory: Path, *, segment_size_bytes: int, pooled: bool) -> None:
        self.directory = directory
        self.pooled = pooled
        """With the pool on, readers (and flush) see only what `commit` copied."""
        self.segment_size_bytes = segment_size_bytes
        self.segments: list[CommitLogSegment] = []
        self.commit_cursor = 0
        """Where the next `commit` pass starts (pool on): the committed position as of the
        last pass.  One attribute read, where `committed_position` walks segments: the put
        path's commit-service wakeup reads this (0.6 µs a put less, measured)."""
        self.flushed_position = 0
        self.last_store_timestamp_ms = 0
        """Store time of the newest appended record (written by the put path)."""
        self.committed_store_timestamp_ms = 0
        self.flushed_store_timestamp_ms = 0
        """Store time of the newest record known synced: the checkpoint's physic time."""
        self._commit_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self.syncs_total = 0
        """Segment syncs that moved the flushed position (see stats.py)."""

    def load(self) -> list[CommitLogSegment]:
        """Open every segment file in position order (positions set to full; recovery
        then sets the real end)."""
        assert not self.segments
        # A crash while the allocator was preparing a segment (older versions prepared it
        # beside the segments, as <name>.creating).
        creating = self.directory.parent / CREATING_DIRECTORY
        leftovers = [*self.directory.glob("*" + CREATING_SUFFIX),
                     *creating.glob(creating_name(COMMITLOG_DIRECTORY, "*"))]
        for leftover in leftovers:
            leftover.unlink()
        names = sorted(path for path in self.directory.iterdir()
                       if parse_offset_file_name(path.name) is not None)
        for path in names:
            self.segments.append(
                CommitLogSegment.open_existing(path, size_bytes=self.segment_size_bytes))
        return self.segments

    # -- lookup --------------------------------------------------------------------------
    @property
    def last(self) -> CommitLogSegment | None:
        return self.segments[-1] if self.segments else None

    @property
    def min_position(self) -> int:
        return self.segments[0].start_position if self.segments else 0

    @property
    def written_position(self) -> int:
        last = self.last
        return last.start_position + last.written_position if last else 0

    @property
    def committed_position(self) -> int:
        """Exclusive end of what readers may see: every written byte with the pool off; with
        the pool on, what `commit` copied into the files so far.

        Pool on, a full segment can still hold uncommitted bytes after the next one started
        (its file is zeros there), so the end is in the first segment, from the commit
        cursor on, that is not readable to its end; pool off, every segment before the last
        is full and written."""
        segments = self.segments
        if not segments:
            return 0
        if self.pooled:
            index = self._index_of(self.commit_cursor)
            while index < len(segments):
                segment = segments[index]
                if segment.read_position < segment.size_bytes:
                    return segment.start_position + segment.read_position
                index += 1
        last = segments[-1]
        return last.start_position + last.read_position

    def _index_of(self, position: int) -> int:
        """Index of the segment holding `position`, clamped (retention only removes from the
        front, so the arithmetic holds)."""
        segments = self.segments
        index = (position - segments[0].start_position) // self.segment_size_bytes
        return min(max(index, 0), len(segments) - 1)

    def find(self, position: int) -> CommitLogSegment | None:
        """The segment containing `position`, or None."""
        segments = self.segments
        if not segments:
            return None
        index = (position - segments[0].start_position) // self.segment_size_bytes
        if 0 <= index < len(segments):
            segment = segments[index]
            if segment.start_position <= position < segment.end_position:
                return segment
        for segment in segments:  # gaps after retention deleted files: fall back to a scan
            if segment.start_position <= position < segment.end_position:
                return segment
        return None

    def append(self, segment: CommitLogSegment) -> None:
        last = self.last
        assert last is None or last.is_full, "only a full segment is followed by another"
        assert last is None or segment.start_position == last.end_position
        if last is None:
            # A follower's empty log may start past 0 (the master's retention moved its start):
            # commit and flush walk from here.
            assert self.commit_cursor <= segment.start_position
            self.commit_cursor = self.flushed_position = segment.start_position
        self.segments.append(segment)

    # -- commit and flush ----------------------------------------------------------------
    def commit(self, *, pages_min: int, return_buffer: ReturnBuffer) -> bool:
        """Commit pool-buffered bytes into the files; True if anything moved."""
        with self._commit_lock:
            store_timestamp_ms = self.last_store_timestamp_ms
            moved_any = False
            while True:
                segment = self.find(self.commit_cursor) if self.segments else None
                if segment is None:
                    break
                moved, finished_buffer = segment.commit(pages_min=pages_min)
                if finished_buffer is not None:
                    return_buffer(finished_buffer)
                moved_any |= moved
                self.commit_cursor = segment.start_position + segment.committed_position
                if segment.committed_position < segment.size_bytes:
                    break
            if moved_any or self.commit_cursor == self.written_position:
                self.committed_store_timestamp_ms = store_timestamp_ms
            return moved_any

    def flush(self, *, pages_min: int, group_end: tuple[int, int] | None = None) -> bool:
        """fdatasync what is readable; True if the flushed position moved.  `group_end`
        (position, store time of its last record), from `CommitLog.seal_group`, caps it."""
        with self._flush_lock:
            # Captured before the positions are read: every record stamped at or before this
            # time is below the position the sync will cover.
            store_timestamp_ms = (self.committed_store_timestamp_ms if self.pooled
                                  else self.last_store_timestamp_ms)
            end_position = None
            if group_end is not None:
                end_position, store_timestamp_ms = group_end
            moved_any = False
            while True:
                segment = self.find(self.flushed_position) if self.segments else None
                if segment is None:
                    break
                moved = segment.flush(
                    pages_min=pages_min, end_position=None if end_position is None
                    else end_position - segment.start_position)
                if moved:
                    self.syncs_total += 1
                moved_any |= moved
                self.flushed_position = segment.start_position + segment.flushed_position
                if segment.flushed_position < segment.size_bytes:
                    break
            if moved_any:
                self.flushed_store_timestamp_ms = store_timestamp_ms
            return moved_any

    # -- recovery and shutdown -----------------------------------------------------------
    def truncate_after(self, position: int) -> list[Path]:
        """Make `position` the end of the log: the containing segment is cut there, later
        segments are deleted.  Returns the deleted paths."""
        deleted = []
        for segment in list(self.segments):
            if segment.start_position > position:
                self.segments.remove(segment)
                segment.close(delete=True)
                deleted.append(segment.path)
            elif position < segment.end_position:
                segment.truncate(position - segment.start_position)
        self.commit_cursor = self.flushed_position = position
        return deleted

    def delete_oldest(self, *, count_max: int,
                      expired: Callable[[CommitLogSegment], bool]) -> list[CommitLogSegment]:
        """Retention: remove up to `count_max` segments from the front while `expired` says
        so, never the last one.  A removed segment is closed for deletion: its file goes when
        the last reader releases it.  Copy-on-write, so a concurrent `find` stays valid."""
        removed: list[CommitLogSegment] = []
        while len(self.segments) > 1 and len(removed) < count_max:
            first = self.segments[0]
            if first.flushed_position < first.size_bytes or not expired(first):
                break  # never a segment whose bytes are not all on disk
            self.segments = self.segments[1:]
            first.close(delete=True)
            removed.append(first)
        return removed

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments.clear()
