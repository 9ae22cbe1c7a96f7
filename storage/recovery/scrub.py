"""Read-only scans of a store directory: what `mqstore inspect` and `mqstore verify` show.

Nothing here takes the writer's lock or changes a byte: it may run beside a live writer (it
then sees a consistent prefix, since records are stamped before positions move) or on a copy.
"""

from __future__ import annotations

import dataclasses
import mmap
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import StoreFormatError
from ..files.consume_queue_file import ENTRY_SIZE_BYTES
from ..files.index_file import INDEX_HEADER
from ..files.mapped_file import last_nonzero_end
from ..format import record
from ..format.volume import INDEX_DIRECTORY, parse_offset_file_name
from ..queues.reader import QueueFiles, list_queues, queue_directory

ProgressCallback = Callable[[int], None]


@dataclasses.dataclass
class Corruption:
    physical_offset: int
    reason: str


@dataclasses.dataclass
class SegmentSummary:
    name: str
    start_position: int
    size_bytes: int
    record_count: int = 0
    written_position: int = 0
    """Where data ends in this segment (its end if it ends with a BLANK)."""
    ends_with_blank: bool = False
    first_store_timestamp_ms: int = 0
    last_store_timestamp_ms: int = 0
    corruptions: list[Corruption] = dataclasses.field(default_factory=list)


def segment_paths(directory: Path) -> list[Path]:
    """The segment files of `<directory>/commitlog` in position order (checked sizes)."""
    commitlog = directory / "commitlog"
    if not commitlog.is_dir():
        raise StoreFormatError(f"{directory}: no commitlog/ directory; not a store")
    paths = sorted(p for p in commitlog.iterdir() if parse_offset_file_name(p.name) is not None)
    sizes = {p.stat().st_size for p in paths}
    if len(sizes) > 1:
        raise StoreFormatError(f"{commitlog}: segments of different sizes {sorted(sizes)}")
    return paths


def scan_segment(path: Path, *, verify_crc: bool,
                 progress: ProgressCallback | None = None) -> SegmentSummary:
    """Walk every record of one segment file; CRC-check bodies if asked."""
    start = parse_offset_file_name(path.name)
    assert start is not None
    size = path.stat().st_size
    summary = SegmentSummary(path.name, start, size)
    if size == 0:
        summary.corruptions.append(Corruption(start, "empty segment file"))
        return summary
    with path.open("rb") as file, mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ) as view:
        position = _walk(view, summary, verify_crc=verify_crc, progress=progress)
        summary.written_position = start + position
        if not summary.ends_with_blank:
            tail_end = last_nonzero_end(view, position)
            if tail_end > position and not summary.corruptions:
                summary.corruptions.append(Corruption(
                    start + position, f"{tail_end - position} bytes of non-zero data after "
                                      f"the last valid record"))
    return summary


def _walk(view: mmap.mmap, summary: SegmentSummary, *, verify_crc: bool,
          progress: ProgressCallback | None) -> int:
    position = 0
    size = summary.size_bytes
    start = summary.start_position
    while position < size:
        result = record.check_record(view, position, limit=size,
                                     expected_physical_offset=start + position,
                                     verify_crc=verify_crc)
        if result.status is record.RecordCheck.OK:
            assert result.head is not None
            summary.record_count += 1
            if summary.record_count == 1:
                summary.first_store_timestamp_ms = result.head.store_timestamp_ms
            summary.last_store_timestamp_ms = result.head.store_timestamp_ms
        elif result.status is record.RecordCheck.BLANK:
            summary.ends_with_blank = True
        elif result.status is record.RecordCheck.END:
            break
        else:
            summary.corruptions.append(Corruption(start + position, result.reason))
            if result.size_bytes <= 0:
                break  # no trustworthy length: the rest of this segment cannot be walked
        if progress is not None:
            progress(result.size_bytes)
        position += result.size_bytes
        if result.status is record.RecordCheck.BLANK:
            break
    return position


def scan_store(directory: Path, *, verify_crc: bool,
               progress: ProgressCallback | None = None) -> Iterator[SegmentSummary]:
    for path in segment_paths(directory):
        yield scan_segment(path, verify_crc=verify_crc, progress=progress)


def verify_store(directory: Path, *, progress: ProgressCallback | None = None
                 ) -> tuple[list[SegmentSummary], list[Corruption]]:
    """CRC-scrub every record.  Besides bad records, a segment that stops without a BLANK
    while a later segment holds data is a hole, and is reported as corruption too."""
    summaries = list(scan_store(directory, verify_crc=True, progress=progress))
    corruptions = [c for summary in summaries for c in summary.corruptions]
    holding = [s for s in summaries if s.record_count or s.corruptions]
    for summary in holding[:-1]:
        if not summary.ends_with_blank and not summary.corruptions:
            corruptions.append(Corruption(summary.written_position,
                                          f"segment {summary.name} ends without a BLANK record "
                                          f"but later segments hold data"))
    return summaries, sorted(corruptions, key=lambda c: c.physical_offset)


@dataclasses.dataclass
class QueueSummary:
    topic: str
    queue_id: int
    file_count: int
    min_offset: int
    max_offset: int


def scan_consume_queues(directory: Path) -> list[QueueSummary]:
    """Every `consumequeue/<topic>/<queue id>/` with its offsets (queues/reader.py)."""
    summaries = []
    for key in list_queues(directory):
        files = QueueFiles(queue_directory(directory, key))
        min_offset = files.first_real_offset()
        if min_offset is None:
            continue
        last_offset = files.starts[-1] // ENTRY_SIZE_BYTES
        summaries.append(QueueSummary(topic=key[0], queue_id=key[1],
                                      file_count=len(files.starts), min_offset=min_offset,
                                      max_offset=files.written_end(last_offset)))
    return summaries


@dataclasses.dataclass
class IndexSummary:
    file_count: int
    entry_count: int
    end_physical_offset: int


def scan_index(directory: Path) -> IndexSummary:
    """Index files and their entries, from each 40-byte header."""
    paths = sorted((directory / INDEX_DIRECTORY).glob("[0-9]" * 17)) \
        if (directory / INDEX_DIRECTORY).is_dir() else []
    entries = 0
    end = 0
    for path in paths:
        with path.open("rb") as file:
            header = file.read(INDEX_HEADER.size)
        if len(header) == INDEX_HEADER.size:
            _, _, _, end_physical, _, index_count = INDEX_HEADER.unpack(header)
            entries += max(index_count, 1) - 1  # the count starts at 1
            end = max(end, end_physical)
    return IndexSummary(file_count=len(paths), entry_count=entries, end_physical_offset=end)
