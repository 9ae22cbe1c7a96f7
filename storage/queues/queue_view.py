"""`QueueView`: one consume queue another process (the indexer) writes, read-only here.

It is a `ConsumeQueue`, so `reads.get` and `reads.offset_by_time` serve it unchanged, but
its files are mapped `ACCESS_READ` and its readable end is only ever what someone vouched for:

* a notice ("queue advanced to next offset n", or a snapshot's max offset): the indexer
  sends it after writing the entries below n;
* `dispatched`: every record below the indexer's published `dispatched_position` has its
  entry written, so the entries whose record starts below it are whole
  (`dispatched_offset`).  That search reads entries the indexer may be writing at that
  instant: a torn 20-byte entry can look like a record below the bound, so the last entry it
  counts is checked against the commit log before it is trusted (at most one entry of a
  queue is ever in the middle of a write: the indexer writes them in order, one at a time).

Files (`consumequeue/<topic>/<queue id>/<20-digit start position>`, see
consume_queue_file.py) appear at full size and are filled in place; the view opens the
next one by name when the vouched end reaches it, and drops leading ones the indexer's
retention deleted (`forget_deleted`).  Invariant, as in `ConsumeQueue`: the files are
contiguous, every file but the last is fully readable, and the last holds the readable end.
"""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path

from ..config import PAGE_SIZE_BYTES
from ..errors import StoreFormatError
from ..files.consume_queue_file import ENTRY_SIZE_BYTES, ConsumeQueueFile, is_filler
from ..format.volume import offset_file_name
from .consume_queue import ConsumeQueue
from .reader import QueueFiles, RecordMatches

log = logging.getLogger(__name__)


class QueueView(ConsumeQueue):
    """Use `vouch`, `lower`, `settle_min`, `forget_deleted`, `dispatched_offset`; the
    writing methods of `ConsumeQueue` refuse."""

    def __init__(self, directory: Path, *, topic: str, queue_id: int,
                 file_size_bytes: int) -> None:
        # A view creates no file: it gets no directory to prepare them in, nor a step to
        # reserve blocks by (any positive value: it is never used).
        super().__init__(directory, topic=topic, queue_id=queue_id,
                         file_size_bytes=file_size_bytes, allocate_step_bytes=PAGE_SIZE_BYTES,
                         creating_directory=Path("/nonexistent"))

    # -- what a queue view must never do ------------------------------------------------------
    def load(self) -> bool:
        raise TypeError("a queue view never recovers (recovery cuts and deletes files)")

    def put(self, *, physical_offset: int, size_bytes: int, tags_code: int,
            queue_offset: int) -> bool:
        raise TypeError("a queue view is read-only")

    def truncate_to_physical(self, physical_end: int) -> int:
        raise TypeError("a queue view is read-only")

    def delete_before_physical(self, physical_min: int) -> int:
        raise TypeError("a queue view is read-only (see forget_deleted)")

    # -- the readable end ----------------------------------------------------------------------
    def vouch(self, max_offset: int) -> bool:
        """Make the entries below `max_offset` readable; True if the end moved.  Stops early
        (logged) at a file that does not exist, which a correct indexer never causes."""
        target = max_offset * ENTRY_SIZE_BYTES
        if target <= self.max_position:
            return False
        if not self.files and not self._open_first(below_position=target):
            return False
        while True:
            last = self.files[-1]
            if target <= last.end_position:
                last.set_positions(target - last.start_position)
                break
            last.set_positions(last.size_bytes)
            following = self._open_file(last.end_position)
            if following is None:
                log.warning("%s: vouched up to offset %d, but the file after %s is missing",
                            self.directory, max_offset, last.path.name)
                break
            self.files = [*self.files, following]  # copy-on-write, as ConsumeQueue does
        assert self.max_position <= target
        return True

    def lower(self, max_offset: int) -> None:
        """The indexer says the queue ends at `max_offset`, below what was readable here (it
        cut the queue after a writer's recovery lost records): believe it."""
        target = max_offset * ENTRY_SIZE_BYTES
        if target >= self.max_position:
            return
        keep = [f for f in self.files if f.start_position < target] or self.files[:1]
        for dropped in self.files[len(keep):]:
            dropped.close()
        self.files = keep
        last = keep[-1]
        last.set_positions(min(last.size_bytes, max(0, target - last.start_position)))
        self.min_position = min(self.min_position, self.max_position)

    def settle_min(self, *, log_min_position: int, min_offset: int = 0) -> None:
        """Raise `min_position` to the first readable entry of the first file that is neither
        a filler nor below the commit log's start (RocketMQ `correctMinOffset`), or to
        `min_offset` (a snapshot's) if that is higher."""
        if not self.files:
            return
        first = self.files[0]
        low, high = 0, first.written_position // ENTRY_SIZE_BYTES  # fillers and gone: a prefix
        while low < high:
            middle = (low + high) // 2
            physical_offset, size, _ = first.entry(middle * ENTRY_SIZE_BYTES)
            if is_filler(physical_offset, size) or physical_offset < log_min_position:
                low = middle + 1
            else:
                high = middle
        settled = max(first.start_position + low * ENTRY_SIZE_BYTES,
                      min_offset * ENTRY_SIZE_BYTES)
        self.min_position = min(max(self.min_position, settled), self.max_position)

    def forget_deleted(self) -> int:
        """Drop leading files the indexer's retention deleted (never the last one, which it
        never deletes); a file a reader holds stays mapped until released."""
        dropped = 0
        while len(self.files) > 1 and not self.files[0].path.exists():
            first = self.files[0]
            self.files = self.files[1:]
            first.close()
            dropped += 1
        if self.files:
            self.min_position = max(self.min_position, self.files[0].start_position)
        return dropped

    def dispatched_offset(self, below_physical: int, *, record_matches: RecordMatches) -> int:
        """The max offset `dispatched` vouches for: one past the last written entry whose
        record starts below `below_physical` (searched from the current readable end), less
        a last entry that is being written right now (reader.py)."""
        files = self._files_on_disk()
        known = self.max_position // ENTRY_SIZE_BYTES
        if not files.starts:
            return 0
        from_offset = known if self.files else files.starts[0] // ENTRY_SIZE_BYTES
        end = files.entries_below(below_physical, from_offset=from_offset)
        return files.trusted_end(end, known_offset=max(known, from_offset),
                                 record_matches=record_matches)

    def _files_on_disk(self) -> QueueFiles:
        return QueueFiles(self.directory, file_size_bytes=self.file_size_bytes)

    def _open_first(self, *, below_position: int) -> bool:
        starts = [start for start in self._files_on_disk().starts if start < below_position]
        if not starts:
            return False
        first = self._open_file(starts[0])
        if first is None:
            return False
        self.files = [first]
        self.min_position = first.start_position
        return True

    def _open_file(self, start_position: int) -> ConsumeQueueFile | None:
        path = self.directory / offset_file_name(start_position)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            size_bytes = os.fstat(fd).st_size
            if size_bytes != self.file_size_bytes:
                raise StoreFormatError(f"{path}: {size_bytes} bytes, but "
                                       f"consume_queue_file_size_bytes is "
                                       f"{self.file_size_bytes}; use the indexer's settings")
            mapping = mmap.mmap(fd, size_bytes, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(fd)
            raise
        return ConsumeQueueFile(path=path, start_position=start_position,
                                size_bytes=size_bytes, fd=fd, mapping=mapping)

