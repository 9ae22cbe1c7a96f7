"""What the planner learns about a store directory without reading its records.

    <store>/commitlog/<20-digit start position>   segments, all the same size
    <store>/positions                             the writer's published watermarks, if a
                                                  writer service runs (split deployment)
    <store>/consumequeue/<topic>/<queue id>/...   consume queues (streaming reads them)

The readable end of the log is the writer's published `committed_position` when `positions`
exists: records below it are whole even while the writer appends.  Without it (an embedded
store, closed, or a copy of a volume) the end is wherever the records end, found by the
executors as they walk.  An embedded `MessageStore` that is open in another process has no
published end: read a copy, or run the split deployment (writer, indexer, notifier).
"""

from __future__ import annotations

import dataclasses
import mmap
import os
from pathlib import Path

from mqstore.storage.errors import StoreFormatError
from mqstore.storage.files.watermarks import PositionsFile
from mqstore.storage.format import record
from mqstore.storage.format.volume import POSITIONS_FILE, parse_offset_file_name
from mqstore.storage.recovery.scrub import segment_paths

from .options import POSITION_MAX

HEAD_PEEK_BYTES = 256
"""Enough bytes to decode the fixed head of any record layout (at most 113 bytes)."""


@dataclasses.dataclass(frozen=True)
class SegmentInfo:
    start_position: int
    first_store_timestamp_ms: int | None
    """Store time of the segment's first record (None if it holds none)."""


@dataclasses.dataclass(frozen=True)
class StoreFiles:
    directory: str
    segment_size_bytes: int
    segments: tuple[SegmentInfo, ...]
    committed_position: int
    """Exclusive end of what may be read: the published committed position, or no bound."""
    min_position: int


def load_store_files(directory: str | Path) -> StoreFiles:
    """List the segments of `directory`; `StoreFormatError` if it is not a store."""
    root = Path(directory)
    if not root.is_dir():
        raise StoreFormatError(f"{root}: no such directory")
    paths = segment_paths(root)  # checks commitlog/ exists and every segment has one size
    size = paths[0].stat().st_size if paths else 0
    if paths and size == 0:
        raise StoreFormatError(f"{paths[0]}: an empty segment file")
    infos = []
    for path in paths:
        start = parse_offset_file_name(path.name)
        assert start is not None
        infos.append(SegmentInfo(start, _first_store_timestamp_ms(path)))
    committed_position, min_position = _published_positions(root)
    if infos:
        min_position = max(min_position, infos[0].start_position)
    return StoreFiles(directory=str(root), segment_size_bytes=size, segments=tuple(infos),
                      committed_position=committed_position, min_position=min_position)


def _first_store_timestamp_ms(path: Path) -> int | None:
    """The first record of a segment always starts at byte 0 (a record never straddles)."""
    with path.open("rb") as file:
        head = file.read(HEAD_PEEK_BYTES)
    if len(head) < record.BLANK_SIZE_BYTES:
        return None
    size, magic = int.from_bytes(head[:4], "big", signed=True), \
        int.from_bytes(head[4:8], "big", signed=True)
    if magic not in (record.MAGIC_V1, record.MAGIC_V2) or size < 91:
        return None
    _, decoded = record.decode_head(head, 0)
    return decoded.store_timestamp_ms


def _published_positions(root: Path) -> tuple[int, int]:
    """(committed end, min position) the writer published, or (no bound, 0)."""
    path = root / POSITIONS_FILE
    if not path.exists():
        return POSITION_MAX, 0
    positions = PositionsFile(path, writable=False)
    try:
        found = positions.read()
    finally:
        positions.close()
    if found is None:
        return POSITION_MAX, 0
    values = found[1]
    return values["committed_position"], values["min_position"]


def segment_path(directory: str, start_position: int) -> str:
    return os.path.join(directory, "commitlog", f"{start_position:020d}")


def map_segment(directory: str, start_position: int) -> mmap.mmap | None:
    """Map a segment read-only; None if retention deleted it since planning."""
    try:
        fd = os.open(segment_path(directory, start_position), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            raise StoreFormatError(f"{segment_path(directory, start_position)}: empty segment")
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
