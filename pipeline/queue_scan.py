"""Read-only consume queues for the streaming reader: which queues exist, how far each is
readable, and the entries of an offset range, through the engine's one reader of queues
another process writes (storage/queues/reader.py): its written end, its fillers (never
rows), and its last entry checked against the commit log before it is trusted (the indexer
may be writing it at that very moment).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mqstore.storage.errors import StoreFormatError
from mqstore.storage.files.consume_queue_file import (
    ENTRY_DTYPE,
    ENTRY_SIZE_BYTES,
    Entries,
    is_filler,
)
from mqstore.storage.format import record
from mqstore.storage.format.padding import PADDING_TOPIC
from mqstore.storage.queues import reader
from mqstore.storage.queues.reader import QueueFiles, queue_directory

from .store_files import segment_path

QueueKey = tuple[str, int]

RECORD_SIZE_MIN_BYTES = 91
"""The smallest record (no body, topic or properties): an entry of less is not real."""


class DataLossError(StoreFormatError):
    """Offsets a query still has to read are gone (retention deleted their files)."""


def list_queues(store_directory: str, topics: frozenset[str] | None,
                queue_ids: frozenset[int] | None) -> list[QueueKey]:
    """The queues a query reads: every queue but the group-commit filler's, filtered."""
    return [(topic, queue_id) for topic, queue_id in reader.list_queues(Path(store_directory))
            if topic != PADDING_TOPIC and (topics is None or topic in topics)
            and (queue_ids is None or queue_id in queue_ids)]


def _files(store_directory: str, key: QueueKey) -> QueueFiles:
    return QueueFiles(queue_directory(Path(store_directory), key))


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
        files = _files(self.store_directory, key)
        min_offset = files.first_real_offset()
        if min_offset is None:
            return None
        known = max(self._known_end.get(key, 0), files.starts[0] // ENTRY_SIZE_BYTES)
        end = files.written_end(known)
        end = files.trusted_end(end, known_offset=max(known, min_offset), record_matches=(
            lambda physical_offset, size, queue_offset: record_matches(
                self.store_directory, self.segment_size_bytes, key=key,
                physical_offset=physical_offset, size_bytes=size, queue_offset=queue_offset)))
        self._known_end[key] = end
        return QueueBounds(min_offset=min(min_offset, end), max_offset=end)


def record_matches(store_directory: str, segment_size_bytes: int, *, key: QueueKey,
                   physical_offset: int, size_bytes: int, queue_offset: int) -> bool:
    """Whether the commit log holds the record a consume queue entry describes."""
    if physical_offset < 0 or size_bytes < RECORD_SIZE_MIN_BYTES or segment_size_bytes <= 0:
        return False
    segment_start = physical_offset - physical_offset % segment_size_bytes
    try:
        with open(segment_path(store_directory, segment_start), "rb") as file:
            file.seek(physical_offset - segment_start)
            data = file.read(size_bytes)
    except FileNotFoundError:
        return False
    return record.holds_entry(data, 0, limit=len(data), physical_offset=physical_offset,
                              size_bytes=size_bytes, queue_id=key[1], queue_offset=queue_offset)


def read_entries(store_directory: str, key: QueueKey, *, start_offset: int, end_offset: int,
                 from_earliest: bool) -> tuple[npt.NDArray[np.int64], Entries]:
    """(queue offsets, entries) of [start_offset, end_offset), fillers left out.  Offsets
    whose files retention deleted raise `DataLossError`, unless `from_earliest` (a queue the
    query had not seen yet: it starts wherever the queue now starts)."""
    files = _files(store_directory, key)
    if not files.starts:
        raise DataLossError(f"{store_directory}: consume queue {key[0]}/{key[1]} is gone")
    first_offset = files.starts[0] // ENTRY_SIZE_BYTES
    if start_offset < first_offset:
        if not from_earliest:
            raise DataLossError(
                f"{store_directory}: consume queue {key[0]}/{key[1]} offsets [{start_offset}, "
                f"{first_offset}) were deleted by retention before they were read; restart "
                f"the query with failOnDataLoss=false to skip them")
        start_offset = min(first_offset, end_offset)
    present = set(files.starts)
    offsets, chunks = [], []
    offset = start_offset
    while offset < end_offset:
        if files.file_start(offset) not in present:
            raise DataLossError(f"{store_directory}: consume queue {key[0]}/{key[1]} has no "
                                f"file for offset {offset}")
        entries = files.read_entries(offset, end_offset - offset)
        if len(entries) == 0:
            raise StoreFormatError(f"{files.path(files.file_start(offset))}: shorter than its "
                                   f"entries from {offset}")
        chunks.append(entries)
        offsets.append(np.arange(offset, offset + len(entries), dtype=np.int64))
        offset += len(entries)
    if not chunks:
        return np.zeros(0, np.int64), np.zeros(0, ENTRY_DTYPE)
    all_entries, all_offsets = np.concatenate(chunks), np.concatenate(offsets)
    real = ~is_filler(all_entries["physical_offset"], all_entries["size"])
    return all_offsets[real], all_entries[real]
