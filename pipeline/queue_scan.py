"""Read-only consume queues for the streaming reader: which queues exist, how far each is
readable, and the entries of an offset range.

    consumequeue/<topic>/<queue id>/<20-digit start byte position>   20-byte entries
    (storage/files/consume_queue_file.py: int64 physical offset, int32 size, int64 tags code)

A queue's readable end is the first entry that is not valid (offset < 0 or size <= 0; the
never-written tail of a file is zeros), as the engine's own recovery finds it.  The indexer
may be writing the entry after the last one at that very moment, and a torn 20-byte entry can
look valid, so the last entry counted is checked against the commit log (the record there
must have that size, queue id and queue offset) before it is trusted, as the notifier's
followers do.  The first entries of a queue whose first file does not start at offset 0 are
fillers (0, 0x7FFFFFFF, 0): they are never rows.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mqstore.storage.errors import StoreFormatError
from mqstore.storage.files.consume_queue_file import ENTRY_DTYPE, ENTRY_SIZE_BYTES, FILLER_SIZE
from mqstore.storage.format import record
from mqstore.storage.format.padding import PADDING_TOPIC
from mqstore.storage.format.volume import CONSUME_QUEUE_DIRECTORY, parse_offset_file_name

from .store_files import segment_path

QueueKey = tuple[str, int]
Entries = npt.NDArray[np.void]

SCAN_ENTRIES_PER_READ = 65_536
"""Entries read per pread while looking for a queue's end (1.3 MB)."""


class DataLossError(StoreFormatError):
    """Offsets a query still has to read are gone (retention deleted their files)."""


def list_queues(store_directory: str, topics: frozenset[str] | None,
                queue_ids: frozenset[int] | None) -> list[QueueKey]:
    root = Path(store_directory) / CONSUME_QUEUE_DIRECTORY
    if not root.is_dir():
        return []
    found = []
    for topic_directory in sorted(root.iterdir()):
        topic = topic_directory.name
        if topic == PADDING_TOPIC or (topics is not None and topic not in topics):
            continue
        for queue_directory in sorted(topic_directory.iterdir()):
            if queue_directory.name.isdigit() and (
                    queue_ids is None or int(queue_directory.name) in queue_ids):
                found.append((topic, int(queue_directory.name)))
    return found


def queue_files(store_directory: str, key: QueueKey) -> list[tuple[int, str]]:
    """(start byte position, path) of a queue's files, in order."""
    directory = os.path.join(store_directory, CONSUME_QUEUE_DIRECTORY, key[0], str(key[1]))
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    starts = sorted(start for start in map(parse_offset_file_name, names) if start is not None)
    return [(start, os.path.join(directory, f"{start:020d}")) for start in starts]


def file_size_bytes(files: list[tuple[int, str]]) -> int:
    size = os.stat(files[0][1]).st_size
    if size <= 0 or size % ENTRY_SIZE_BYTES:
        raise StoreFormatError(f"{files[0][1]}: {size} bytes is not a consume queue file")
    return size


def _read_entries(path: str, *, first_index: int, count: int) -> Entries:
    with open(path, "rb") as file:
        file.seek(first_index * ENTRY_SIZE_BYTES)
        raw = file.read(count * ENTRY_SIZE_BYTES)
    usable = len(raw) // ENTRY_SIZE_BYTES * ENTRY_SIZE_BYTES
    return np.frombuffer(raw[:usable], dtype=ENTRY_DTYPE)


@dataclasses.dataclass
class QueueBounds:
    min_offset: int
    max_offset: int


class QueueScanner:
    """Finds each queue's readable end, resuming from the end it found last time (the
    streaming reader's planner keeps one for the life of the query)."""

    def __init__(self, store_directory: str, *, segment_size_bytes: int) -> None:
        self.store_directory = store_directory
        self.segment_size_bytes = segment_size_bytes
        self._known_end: dict[QueueKey, int] = {}

    def bounds(self, key: QueueKey) -> QueueBounds | None:
        files = queue_files(self.store_directory, key)
        if not files:
            return None
        size = file_size_bytes(files)
        entries_per_file = size // ENTRY_SIZE_BYTES
        first_start, first_path = files[0]
        head = _read_entries(first_path, first_index=0, count=entries_per_file)
        real = np.flatnonzero(~((head["physical_offset"] == 0) & (head["size"] == FILLER_SIZE)))
        min_offset = first_start // ENTRY_SIZE_BYTES + (int(real[0]) if real.size else len(head))
        end = max(self._known_end.get(key, 0), first_start // ENTRY_SIZE_BYTES)
        end = self._scan_end(files, end, entries_per_file)
        if end > min_offset and not self._last_entry_holds(key, files, end, entries_per_file):
            end -= 1  # being written right now: the next scan takes it
        self._known_end[key] = end
        return QueueBounds(min_offset=min(min_offset, end), max_offset=end)

    def _scan_end(self, files: list[tuple[int, str]], offset: int, entries_per_file: int) -> int:
        paths = dict(files)
        while True:
            file_start = offset // entries_per_file * entries_per_file * ENTRY_SIZE_BYTES
            path = paths.get(file_start)
            if path is None:
                return offset
            index = offset % entries_per_file
            entries = _read_entries(path, first_index=index,
                                    count=min(SCAN_ENTRIES_PER_READ, entries_per_file - index))
            invalid = np.flatnonzero((entries["physical_offset"] < 0) | (entries["size"] <= 0))
            if invalid.size:
                return offset + int(invalid[0])
            offset += len(entries)
            if len(entries) == 0:
                return offset

    def _last_entry_holds(self, key: QueueKey, files: list[tuple[int, str]], end: int,
                          entries_per_file: int) -> bool:
        offset = end - 1
        file_start = offset // entries_per_file * entries_per_file * ENTRY_SIZE_BYTES
        path = dict(files).get(file_start)
        if path is None:
            return False
        entry = _read_entries(path, first_index=offset % entries_per_file, count=1)
        if len(entry) != 1:
            return False
        physical_offset, size = int(entry["physical_offset"][0]), int(entry["size"][0])
        return record_matches(self.store_directory, self.segment_size_bytes, key=key,
                              physical_offset=physical_offset, size_bytes=size,
                              queue_offset=offset)


def record_matches(store_directory: str, segment_size_bytes: int, *, key: QueueKey,
                   physical_offset: int, size_bytes: int, queue_offset: int) -> bool:
    """Whether the commit log holds the record a consume queue entry describes."""
    if physical_offset < 0 or size_bytes < 91 or segment_size_bytes <= 0:
        return False
    segment_start = physical_offset - physical_offset % segment_size_bytes
    try:
        with open(segment_path(store_directory, segment_start), "rb") as file:
            file.seek(physical_offset - segment_start)
            head = file.read(128)
    except FileNotFoundError:
        return False
    if len(head) < 91:
        return False
    size, magic = int.from_bytes(head[:4], "big", signed=True), \
        int.from_bytes(head[4:8], "big", signed=True)
    if magic not in (record.MAGIC_V1, record.MAGIC_V2) or size != size_bytes:
        return False
    _, decoded = record.decode_head(head, 0)
    return (decoded.physical_offset == physical_offset and decoded.queue_id == key[1]
            and decoded.queue_offset == queue_offset)


def read_entries(store_directory: str, key: QueueKey, *, start_offset: int, end_offset: int,
                 from_earliest: bool) -> tuple[npt.NDArray[np.int64], Entries]:
    """(queue offsets, entries) of [start_offset, end_offset), fillers left out.  Offsets
    whose files retention deleted raise `DataLossError`, unless `from_earliest` (a queue the
    query had not seen yet: it starts wherever the queue now starts)."""
    files = queue_files(store_directory, key)
    if not files:
        raise DataLossError(f"{store_directory}: consume queue {key[0]}/{key[1]} is gone")
    entries_per_file = file_size_bytes(files) // ENTRY_SIZE_BYTES
    first_offset = files[0][0] // ENTRY_SIZE_BYTES
    if start_offset < first_offset:
        if not from_earliest:
            raise DataLossError(
                f"{store_directory}: consume queue {key[0]}/{key[1]} offsets [{start_offset}, "
                f"{first_offset}) were deleted by retention before they were read; restart "
                f"the query with failOnDataLoss=false to skip them")
        start_offset = min(first_offset, end_offset)
    paths = dict(files)
    offsets, chunks = [], []
    offset = start_offset
    while offset < end_offset:
        file_start = offset // entries_per_file * entries_per_file * ENTRY_SIZE_BYTES
        path = paths.get(file_start)
        if path is None:
            raise DataLossError(f"{store_directory}: consume queue {key[0]}/{key[1]} has no "
                                f"file for offset {offset}")
        index = offset % entries_per_file
        count = min(end_offset - offset, entries_per_file - index)
        entries = _read_entries(path, first_index=index, count=count)
        if len(entries) != count:
            raise StoreFormatError(f"{path}: shorter than its entries [{offset}, "
                                   f"{offset + count})")
        chunks.append(entries)
        offsets.append(np.arange(offset, offset + count, dtype=np.int64))
        offset += count
    if not chunks:
        return np.zeros(0, np.int64), np.zeros(0, ENTRY_DTYPE)
    all_entries, all_offsets = np.concatenate(chunks), np.concatenate(offsets)
    real = ~((all_entries["physical_offset"] == 0) & (all_entries["size"] == FILLER_SIZE))
    return all_offsets[real], all_entries[real]
