"""The consume queue of one (topic, queue id): its files, its offsets, its dispatch rules.

Offsets here are queue offsets (entry counts, as in the record's QUEUEOFFSET); positions are
byte positions in the queue (offset × 20).  RocketMQ `ConsumeQueue`:

* `min_offset` is the first entry still readable (retention moves it); `max_offset` is the
  next offset to be written (exclusive).
* `put` is idempotent for re-dispatch: a record at or below `max_physical_end` is ignored,
  and so is an entry whose slot is already written.
* The first file of a queue whose first entry is not offset 0 is filled up to it with
  (0, Integer.MAX_VALUE, 0) entries, and `min_offset` starts at the first real entry.
* `truncate_to_physical(end)` drops every entry whose record starts at or after `end` (the
  commit log was cut there by recovery).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from ..config import PreallocateMethod
from ..errors import StoreFormatError
from ..files.consume_queue_file import (
    DAMAGED_TAGS_CODE,
    ENTRY_SIZE_BYTES,
    FILLER_SIZE,
    ConsumeQueueFile,
    Entries,
)
from ..files.io import make_directories
from ..format.dispatch_scan import DispatchRecord
from ..format.volume import (
    consume_queue_creating_name,
    parse_offset_file_name,
)

log = logging.getLogger(__name__)


class ConsumeQueueGapError(StoreFormatError):
    """A dispatch would leave a hole in a consume queue (entries are positional)."""


class ConsumeQueue:
    def __init__(self, directory: Path, *, topic: str, queue_id: int, file_size_bytes: int,
                 allocate_step_bytes: int, creating_directory: Path) -> None:
        """`directory` is `<store>/consumequeue/<topic>/<queue id>`; new files are prepared
        in `creating_directory` (`<store>/creating`, format/volume.py) and reserve blocks
        `allocate_step_bytes` at a time (consume_queue_file.py)."""
        assert file_size_bytes % ENTRY_SIZE_BYTES == 0
        assert allocate_step_bytes > 0
        self.directory = directory
        self.topic = topic
        self.queue_id = queue_id
        self.file_size_bytes = file_size_bytes
        self.allocate_step_bytes = allocate_step_bytes
        self.creating_directory = creating_directory
        self.files: list[ConsumeQueueFile] = []
        self.min_position = 0
        self.max_physical_end = 0
        """End (position + size) of the newest record this queue indexes: re-dispatch of
        anything below it is a duplicate."""
        self._lock = threading.Lock()

    # -- offsets ---------------------------------------------------------------------------
    @property
    def max_position(self) -> int:
        last = self.files[-1] if self.files else None
        return last.start_position + last.written_position if last else 0

    @property
    def min_offset(self) -> int:
        return self.min_position // ENTRY_SIZE_BYTES

    @property
    def max_offset(self) -> int:
        return self.max_position // ENTRY_SIZE_BYTES

    # -- load and recover --------------------------------------------------------------------
    def load(self) -> bool:
        """Open the files and find the end of valid entries (RocketMQ scans the last 3
        files; a file is scanned only if the one before it is full of valid entries).

        Returns True if the queue was cut short of what it held: a file a power loss left
        shorter than its size (it and every later file are deleted), or entries that cannot
        be the indexer's followed by more written bytes (garbage: the queue is cut there).
        The queues are derived data: the indexer dispatches again from where a cut queue
        now ends (dispatch/indexer.py), so nothing is lost.  A file longer than the
        configured size is a configuration mismatch (`StoreFormatError`)."""
        assert not self.files
        paths = sorted(p for p in self.directory.iterdir()
                       if parse_offset_file_name(p.name) is not None)
        cut = False
        for number, path in enumerate(paths):
            size = path.stat().st_size
            if 0 <= size < self.file_size_bytes:
                log.warning("%s: %d bytes, not %d: deleting it and the %d files after it; "
                            "dispatch fills the queue again", path, size, self.file_size_bytes,
                            len(paths) - number - 1)
                for later in paths[number:]:
                    later.unlink()
                cut = True
                break
            opened = ConsumeQueueFile.open_existing(path, size_bytes=self.file_size_bytes)
            opened.allocate_step_bytes = self.allocate_step_bytes
            self.files.append(opened)
        cut |= self._find_valid_end()
        if self.files:
            self.min_position = self._first_real_position(self.files[0])
            self.max_physical_end = self._last_physical_end()
        return cut

    def _find_valid_end(self) -> bool:
        """Set the written end of the last files; True if garbage cut entries short."""
        first = max(0, len(self.files) - 3)
        for index in range(first, len(self.files)):
            queue_file = self.files[index]
            previous = self.files[index - 1] if index > 0 else None
            previous_offset = (previous.entry(previous.size_bytes - ENTRY_SIZE_BYTES)[0]
                               if previous is not None else 0)
            end = queue_file.valid_end(previous_physical_offset=previous_offset)
            queue_file.set_positions(end)
            if end < queue_file.size_bytes:
                garbage = any(queue_file.mapping[end:]) or index + 1 < len(self.files)
                if garbage:
                    log.warning("%s: entries past %d cannot be the indexer's: the queue is "
                                "cut there and dispatched again", queue_file.path, end)
                for later in self.files[index + 1:]:
                    later.close(delete=True)
                del self.files[index + 1:]
                if garbage and end < queue_file.size_bytes:
                    queue_file.truncate(end)
                return garbage
        return False

    def _first_real_position(self, queue_file: ConsumeQueueFile) -> int:
        position = 0
        while position < queue_file.written_position:
            physical_offset, size, _ = queue_file.entry(position)
            if not (physical_offset == 0 and size == 0x7FFFFFFF):
                break
            position += ENTRY_SIZE_BYTES
        return queue_file.start_position + position

    def _last_physical_end(self) -> int:
        last = self.files[-1]
        if last.written_position == 0:
            if len(self.files) < 2:
                return 0
            last = self.files[-2]
        physical_offset, size, _ = last.entry(last.written_position - ENTRY_SIZE_BYTES)
        return physical_offset + size

    # -- write (the dispatch thread only) ------------------------------------------------------
    def put(self, *, physical_offset: int, size_bytes: int, tags_code: int,
            queue_offset: int) -> bool:
        """Append the entry for a dispatched record; False if it was a duplicate."""
        if physical_offset + size_bytes <= self.max_physical_end:
            return False
        position = queue_offset * ENTRY_SIZE_BYTES
        with self._lock:
            end = self.max_position
            if position < end:
                return False  # the slot is written already (a repeat)
            if position > end and self.files:
                raise ConsumeQueueGapError(
                    f"{self.directory}: entry for queue offset {queue_offset} (record at "
                    f"{physical_offset}) would leave a hole after offset {end // 20 - 1}")
            queue_file = self._file_for_append(position)
            queue_file.append(physical_offset=physical_offset, size_bytes=size_bytes,
                              tags_code=tags_code)
            self.max_physical_end = physical_offset + size_bytes
        return True

    def put_streak(self, records: Sequence[DispatchRecord], first: int, end: int,
                   tags_codes: Sequence[int] | None) -> int:
        """The entries of `records[first:end]` (records of this queue, in log order; their
        tags codes in `tags_codes`, None for all 0) written in one go, as many as follow the
        queue's end in the room its last file has reserved; returns how many (0 when the
        first is a duplicate, is not the queue's next offset, or needs a new file or a
        reservation: the caller `put`s those)."""
        head = records[first]
        if head.physical_offset + head.total_size <= self.max_physical_end:
            return 0
        with self._lock:
            if not self.files:
                return 0
            last = self.files[-1]
            position = last.written_position
            room = (min(last.allocated_position, last.size_bytes) - position) // ENTRY_SIZE_BYTES
            if room <= 0 or last.start_position + position != head.queue_offset * ENTRY_SIZE_BYTES:
                return 0
            written = last.append_streak(records, first, min(end - first, room), tags_codes)
            if written:
                whole = records[first + written - 1]
                self.max_physical_end = whole.physical_offset + whole.total_size
        return written

    def mark_damaged(self, *, up_to_offset: int, physical_offset: int,
                     size_bytes: int) -> int:
        """Write *damaged entries* for the offsets from the queue's end up to `up_to_offset`:
        their records were lost in damaged bytes of the commit log (dispatcher.py), so each
        points at those bytes (`physical_offset`, `size_bytes`) and a read of it answers
        MESSAGE_CORRUPT instead of the queue skipping the offsets.  Returns how many."""
        size_bytes = min(size_bytes, FILLER_SIZE - 1)  # never taken for a filler
        assert size_bytes > 0
        written = 0
        with self._lock:
            while self.max_offset < up_to_offset:
                queue_file = self._file_for_append(self.max_position)
                queue_file.append(physical_offset=physical_offset, size_bytes=size_bytes,
                                  tags_code=DAMAGED_TAGS_CODE)
                written += 1
            self.max_physical_end = max(self.max_physical_end, physical_offset + size_bytes)
        return written

    def _file_for_append(self, position: int) -> ConsumeQueueFile:
        last = self.files[-1] if self.files else None
        if last is not None and last.written_position < last.size_bytes:
            return last
        start = position - position % self.file_size_bytes if last is None else last.end_position
        creating = self.creating_directory
        make_directories(self.directory, root=creating.parent)
        make_directories(creating, root=creating.parent)
        # warmup: map the reserved pages now, with madvise (no GIL held); the first write
        # into a fresh mapping otherwise faults with the GIL held (~12 ms per file measured
        # at 600 queues, stalling every thread).  Only the first step is reserved: the file
        # is sparse beyond it (consume_queue_file.py).
        step = min(self.allocate_step_bytes, self.file_size_bytes)
        created = ConsumeQueueFile.create(
            self.directory,
            creating=creating / consume_queue_creating_name(self.topic, self.queue_id, start),
            start_position=start, size_bytes=self.file_size_bytes,
            method=PreallocateMethod.FALLOCATE, warmup=True, allocate_bytes=step)
        created.allocate_step_bytes = self.allocate_step_bytes
        created.allocated_position = step
        if last is None:
            created.fill(until_position=position - start)
            self.min_position = position
        self.files.append(created)
        return created

    def truncate_to_physical(self, physical_end: int) -> int:
        """Drop entries whose record starts at or after `physical_end`; return how many."""
        dropped = 0
        with self._lock:
            while self.files:
                last = self.files[-1]
                keep = self._entries_below(last, physical_end)
                dropped += (last.written_position - keep) // ENTRY_SIZE_BYTES
                if keep > 0 or len(self.files) == 1:
                    last.truncate(keep)
                    break
                self.files.pop().close(delete=True)
            self.max_physical_end = self._last_physical_end() if self.files else 0
            self.min_position = min(self.min_position, self.max_position)
        return dropped

    @staticmethod
    def _entries_below(queue_file: ConsumeQueueFile, physical_end: int) -> int:
        view = queue_file.entries(0, queue_file.written_position)
        count = int((view["physical_offset"] < physical_end).sum())  # sorted: a prefix
        del view
        return count * ENTRY_SIZE_BYTES

    def delete_before_physical(self, physical_min: int) -> int:
        """Retention: delete leading files (never the last) whose every entry points below
        the commit log's minimum, then start the queue at its first entry at or above it
        (RocketMQ `deleteExpiredFileByOffset` + `correctMinOffset`).  Returns files deleted."""
        deleted = 0
        with self._lock:
            while len(self.files) > 1:
                first = self.files[0]
                last_physical, _, _ = first.entry(first.written_position - ENTRY_SIZE_BYTES)
                if last_physical >= physical_min:
                    break
                self.files = self.files[1:]  # copy-on-write: readers may be indexing
                first.close(delete=True)
                deleted += 1
            if self.files:
                self.min_position = max(self.min_position, self._first_position_at_or_above(
                    self.files[0], physical_min))
        return deleted

    @staticmethod
    def _first_position_at_or_above(queue_file: ConsumeQueueFile, physical_min: int) -> int:
        view = queue_file.entries(0, queue_file.written_position)
        below = int((view["physical_offset"] < physical_min).sum())
        del view
        return queue_file.start_position + below * ENTRY_SIZE_BYTES

    # -- read -----------------------------------------------------------------------------
    def read(self, queue_offset: int, count_max: int) -> tuple[ConsumeQueueFile, Entries] | None:
        """Held file and a view of up to `count_max` entries from `queue_offset` (within one
        file), or None if the offset is not readable.  The caller deletes the view and then
        releases the file."""
        position = queue_offset * ENTRY_SIZE_BYTES
        if not self.min_position <= position < self.max_position:
            return None
        queue_file = self._find(position)
        if queue_file is None or not queue_file.hold():
            return None
        start = position - queue_file.start_position
        end = min(queue_file.written_position, start + count_max * ENTRY_SIZE_BYTES)
        return queue_file, queue_file.entries(start, end)

    def physical_offset_at(self, queue_offset: int) -> int | None:
        """The commit log position entry `queue_offset` points at, or None if that entry is
        not readable (below the minimum or at or past the written end)."""
        held = self.read(queue_offset, 1)
        if held is None:
            return None
        queue_file, entries = held
        try:
            return int(entries["physical_offset"][0]) if len(entries) else None
        finally:
            del entries
            queue_file.release()

    def _find(self, position: int) -> ConsumeQueueFile | None:
        files = self.files
        if not files:
            return None
        index = (position - files[0].start_position) // self.file_size_bytes
        if 0 <= index < len(files) and files[index].start_position <= position:
            return files[index]
        return None

    # -- flush and close ------------------------------------------------------------------
    def flush(self, *, pages_min: int) -> bool:
        moved = False
        for queue_file in list(self.files):
            moved |= queue_file.flush(pages_min=pages_min)
        return moved

    def close(self) -> None:
        for queue_file in self.files:
            queue_file.close()
        self.files.clear()
