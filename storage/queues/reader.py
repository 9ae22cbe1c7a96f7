"""Each queue's next offset, read from consume queue files another process writes.

The writer of a split deployment (the indexer builds `consumequeue/`) must still stamp every
record with the right queue offset.  It reads the consume queues read-only, counting only the
entries for records before `below_physical`: the position the indexer published as synced in
`dispatched`, so no entry it relies on can be half-written or lost.  Records from there on are
scanned in the log by recovery, whose stamped queue offsets complete the picture (the caller
takes the maximum of both).

Per queue this costs a binary search with one 20-byte `pread` per step in the newest file
(walking back one file when that one holds nothing below the bound), never a full read: with
hundreds of queues of 6 MB files a full read would be gigabytes at every start.

The predicate searched, "entry i is written and its record starts below the bound", is true
then false along a file: written entries are in physical order (fillers, physical offset 0,
come first) and unwritten slots (all zero) follow them.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..files.consume_queue_file import ENTRY_SIZE_BYTES, entries_below_in_file
from ..format.volume import CONSUME_QUEUE_DIRECTORY, parse_offset_file_name

log = logging.getLogger(__name__)


def read_next_offsets(store_directory: Path, *, below_physical: int,
                      file_size_bytes: int) -> dict[tuple[str, int], int]:
    """{(topic, queue id): next queue offset after every entry below `below_physical`}."""
    root = store_directory / CONSUME_QUEUE_DIRECTORY
    offsets: dict[tuple[str, int], int] = {}
    if below_physical <= 0 or not root.is_dir():
        return offsets
    for topic_directory in sorted(root.iterdir()):
        if not topic_directory.is_dir():
            continue
        for queue_directory in sorted(topic_directory.iterdir()):
            if not queue_directory.name.isdigit():
                continue
            found = _queue_next_offset(queue_directory, below_physical, file_size_bytes)
            if found is not None:
                offsets[topic_directory.name, int(queue_directory.name)] = found
    return offsets


def _queue_next_offset(directory: Path, below_physical: int, file_size_bytes: int) -> int | None:
    named = sorted((start, path) for path in directory.iterdir()
                   if (start := parse_offset_file_name(path.name)) is not None)
    for start, path in reversed(named):
        count = _entries_below(path, below_physical, file_size_bytes)
        if count > 0 or start == named[0][0]:
            return (start + count * ENTRY_SIZE_BYTES) // ENTRY_SIZE_BYTES
    return None


def _entries_below(path: Path, below_physical: int, file_size_bytes: int) -> int:
    """How many leading entries of the file are written and below the bound."""
    try:
        slots = min(path.stat().st_size, file_size_bytes) // ENTRY_SIZE_BYTES
    except FileNotFoundError:  # retention removed it meanwhile
        return 0
    return entries_below_in_file(path, below_physical, first_index=0, slots=slots)
