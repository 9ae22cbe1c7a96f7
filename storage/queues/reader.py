"""Consume queues another process writes, read with plain reads: the one reader behind the
notifier's view (queue_view.py), the split writer's queue offsets (`read_next_offsets`),
`mqstore verify`/`inspect` (recovery/scrub.py) and the Spark reader (pipeline/queue_scan.py).

    consumequeue/<topic>/<queue id>/<20-digit start position>   (files/consume_queue_file.py)

Nothing here maps, locks or writes a file.  What a reader may rely on, because the indexer
appends entries one at a time (a 20-byte copy each), in physical order, into files created at
full size and zero-filled:

* a queue's written end is its first entry that is not valid (offset < 0 or size <= 0);
* the entries whose record starts below a position the indexer vouched for are a prefix of
  the written ones (`entries_below`, a binary search with one 20-byte read per step);
* only the last written entry can be in the middle of its copy, so it is checked against
  the commit log before it is trusted (`RecordMatches`, `record.holds_entry`);
* a queue whose first file does not start at offset 0 begins with fillers
  (`consume_queue_file.is_filler`), which are never messages.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import StoreFormatError
from ..files.consume_queue_file import (
    ENTRY,
    ENTRY_DTYPE,
    ENTRY_SIZE_BYTES,
    Entries,
    is_filler,
)
from ..format.volume import CONSUME_QUEUE_DIRECTORY, parse_offset_file_name, parse_queue_id

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]
RecordMatches = Callable[[int, int, int], bool]
"""(physical offset, size, queue offset) → the commit log holds that record there."""

SCAN_ENTRIES_PER_READ = 65_536
"""Entries read per read while looking for a queue's written end (1.3 MB)."""


def list_queues(store_directory: Path) -> list[QueueKey]:
    """Every `consumequeue/<topic>/<queue id>` directory, by topic then queue id (names
    that are not queue ids are skipped, as RocketMQ does)."""
    root = store_directory / CONSUME_QUEUE_DIRECTORY
    try:
        topics = [entry for entry in os.scandir(root) if entry.is_dir()]
    except FileNotFoundError:
        return []
    found: list[QueueKey] = []
    for topic in sorted(topics, key=lambda entry: entry.name):
        try:
            names = os.listdir(topic.path)
        except FileNotFoundError:
            continue  # deleted meanwhile
        found.extend((topic.name, queue_id) for queue_id in
                     sorted(q for q in map(parse_queue_id, names) if q is not None))
    return found


def queue_directory(store_directory: Path, key: QueueKey) -> Path:
    return store_directory / CONSUME_QUEUE_DIRECTORY / key[0] / str(key[1])


class QueueFiles:
    """One queue's files as they are on disk when listed (`refresh` lists again)."""

    def __init__(self, directory: Path, *, file_size_bytes: int | None = None) -> None:
        self.directory = directory
        self._file_size_bytes = file_size_bytes
        self.starts: list[int] = []
        self.refresh()

    def refresh(self) -> None:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            names = []
        self.starts = sorted(s for s in map(parse_offset_file_name, names) if s is not None)

    @property
    def file_size_bytes(self) -> int:
        """The configured size, or the first file's (checked to hold whole entries)."""
        if self._file_size_bytes is None:
            if not self.starts:
                raise StoreFormatError(f"{self.directory}: no consume queue files")
            path = self.path(self.starts[0])
            size = path.stat().st_size
            if size <= 0 or size % ENTRY_SIZE_BYTES:
                raise StoreFormatError(f"{path}: {size} bytes is not a consume queue file")
            self._file_size_bytes = size
        return self._file_size_bytes

    @property
    def entries_per_file(self) -> int:
        return self.file_size_bytes // ENTRY_SIZE_BYTES

    def path(self, start_position: int) -> Path:
        return self.directory / f"{start_position:020d}"

    def file_start(self, offset: int) -> int:
        """The start position of the file holding queue offset `offset`."""
        position = offset * ENTRY_SIZE_BYTES
        return position - position % self.file_size_bytes

    # -- reading entries -----------------------------------------------------------------------
    def read_entries(self, start_offset: int, count: int) -> Entries:
        """Up to `count` entries from `start_offset`, within one file; fewer at the file's
        end, none if the file is gone or shorter."""
        file_start = self.file_start(start_offset)
        index = start_offset - file_start // ENTRY_SIZE_BYTES
        count = min(count, self.entries_per_file - index)
        try:
            with open(self.path(file_start), "rb") as file:
                file.seek(index * ENTRY_SIZE_BYTES)
                raw = file.read(count * ENTRY_SIZE_BYTES)
        except FileNotFoundError:
            raw = b""
        usable = len(raw) // ENTRY_SIZE_BYTES * ENTRY_SIZE_BYTES
        return np.frombuffer(raw[:usable], dtype=ENTRY_DTYPE)

    def entry(self, offset: int) -> tuple[int, int] | None:
        """(physical offset, size) of the entry at `offset`, or None if unreadable."""
        entries = self.read_entries(offset, 1)
        if len(entries) != 1:
            return None
        return int(entries["physical_offset"][0]), int(entries["size"][0])

    def first_real_offset(self) -> int | None:
        """The queue's min offset: the first entry of its first file that is not a filler
        (None without files; the written end if the first file holds only fillers)."""
        if not self.starts:
            return None
        first_offset = self.starts[0] // ENTRY_SIZE_BYTES
        head = self.read_entries(first_offset, self.entries_per_file)
        real = np.flatnonzero(~is_filler(head["physical_offset"], head["size"]))
        return first_offset + (int(real[0]) if real.size else len(head))

    def written_end(self, from_offset: int | None = None) -> int:
        """The offset of the first entry that is not written (searched from `from_offset`,
        known written up to there), or the queue's start without files."""
        if not self.starts:
            return 0
        offset = self.starts[0] // ENTRY_SIZE_BYTES if from_offset is None else from_offset
        present = set(self.starts)
        while self.file_start(offset) in present:
            entries = self.read_entries(offset, SCAN_ENTRIES_PER_READ)
            invalid = np.flatnonzero((entries["physical_offset"] < 0) | (entries["size"] <= 0))
            if invalid.size:
                return offset + int(invalid[0])
            if len(entries) == 0:
                return offset
            offset += len(entries)
        return offset

    def entries_below(self, below_physical: int, *, from_offset: int | None = None) -> int:
        """One past the last written entry whose record starts below `below_physical`
        (fillers count), searched from `from_offset` (known to qualify up to there), file by
        file: log2(entries per file) 20-byte reads in each file crossed."""
        if not self.starts:
            return 0
        offset = self.starts[0] // ENTRY_SIZE_BYTES if from_offset is None else from_offset
        while True:
            file_start = self.file_start(offset)
            first_index = offset - file_start // ENTRY_SIZE_BYTES
            found = _entries_below_in_file(self.path(file_start), below_physical,
                                           first_index=first_index,
                                           slots=self.entries_per_file)
            offset = file_start // ENTRY_SIZE_BYTES + found
            if found < self.entries_per_file:
                return offset

    def trusted_end(self, end_offset: int, *, known_offset: int,
                    record_matches: RecordMatches) -> int:
        """`end_offset`, less its last entry if that one is past `known_offset` (not checked
        before) and does not describe its record: it is being written right now."""
        if end_offset <= known_offset:
            return end_offset
        entry = self.entry(end_offset - 1)
        if entry is None:
            return end_offset - 1
        physical_offset, size_bytes = entry
        if is_filler(physical_offset, size_bytes):
            return end_offset  # fillers are written with the file, before any notice
        if record_matches(physical_offset, size_bytes, end_offset - 1):
            return end_offset
        return end_offset - 1


def read_next_offsets(store_directory: Path, *, below_physical: int,
                      file_size_bytes: int) -> dict[QueueKey, int]:
    """{(topic, queue id): next queue offset after every entry whose record starts below
    `below_physical`}: what the writer of a split deployment continues each queue from (the
    indexer published `below_physical` as synced, so no entry below it is half-written)."""
    offsets: dict[QueueKey, int] = {}
    if below_physical <= 0:
        return offsets
    for key in list_queues(store_directory):
        files = QueueFiles(queue_directory(store_directory, key),
                           file_size_bytes=file_size_bytes)
        if not files.starts:
            continue
        # Walking back from the newest file: the first with an entry below the bound ends it.
        for start in reversed(files.starts):
            count = _entries_below_in_file(files.path(start), below_physical, first_index=0,
                                           slots=files.entries_per_file)
            if count > 0 or start == files.starts[0]:
                offsets[key] = start // ENTRY_SIZE_BYTES + count
                break
    return offsets


def _entries_below_in_file(path: Path, below_physical: int, *, first_index: int,
                           slots: int) -> int:
    """How many leading entries of the file are written (size ≠ 0) and start below the
    bound (fillers do), searching from `first_index` (known to qualify up to there)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return first_index  # deleted meanwhile, or not created yet
    try:
        low, high = first_index, slots  # [0, low) qualify; [high, slots) do not
        while low < high:
            middle = (low + high) // 2
            raw = os.pread(fd, ENTRY_SIZE_BYTES, middle * ENTRY_SIZE_BYTES)
            if len(raw) < ENTRY_SIZE_BYTES:
                high = middle
                continue
            physical_offset, size, _ = ENTRY.unpack(raw)
            if size != 0 and (is_filler(physical_offset, size)
                              or physical_offset < below_physical):
                low = middle + 1
            else:
                high = middle
        return low
    finally:
        os.close(fd)
