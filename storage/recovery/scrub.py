"""Read-only scans of a store directory: what `mqstore inspect` and `mqstore verify` show.

Nothing here takes the writer's lock or changes a byte: it may run beside a live writer (it
then sees a consistent prefix, since records are stamped before positions move) or on a copy.

`verify_store` reports every kind of damage recovery and reads know of, and goes on past
each one (record_scan.py finds the next whole record), so one bad byte hides nothing after it:

| where            | found                                                              |
|------------------|--------------------------------------------------------------------|
| a segment        | a record that fails its magic, sizes, PHYSICALOFFSET or body CRC;  |
|                  | zeros where a record was due with records after; bytes after the   |
|                  | last record; a file of another size than the others                |
| between segments | a missing segment; a segment that stops without a BLANK while a    |
|                  | later one holds data                                               |
| checkpoint       | a damaged trailer                                                  |
| consume queues   | an entry that is not a record's (position, size, queue, offset),   |
|                  | or out of log order; damaged entries dispatch wrote for lost records|
| index            | a header that cannot be the file's                                 |
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import mmap
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import StoreFormatError
from ..files.checkpoint import CheckpointState, read_checkpoint
from ..files.consume_queue_file import DAMAGED_TAGS_CODE, ENTRY_SIZE_BYTES, is_filler
from ..files.index_put import INDEX_HEADER
from ..files.mapped_file import last_nonzero_end
from ..format import record
from ..format.record_scan import find_record
from ..format.volume import (
    CHECKPOINT_FILE,
    COMMITLOG_DIRECTORY,
    INDEX_DIRECTORY,
    offset_file_name,
    parse_offset_file_name,
)
from ..queues.reader import QueueFiles, list_queues, queue_directory

ProgressCallback = Callable[[int], None]
QUEUE_ENTRIES_PER_READ = 4096


@dataclasses.dataclass
class Corruption:
    physical_offset: int
    """Where in the commit log (-1 for a finding in another file)."""
    reason: str
    where: str = ""
    """The file, for a finding outside the commit log's records."""

    def __str__(self) -> str:
        if self.physical_offset >= 0:
            return f"physical offset {self.physical_offset}: {self.reason}"
        return f"{self.where}: {self.reason}"


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
    """The segment files of `<directory>/commitlog` in position order."""
    commitlog = directory / COMMITLOG_DIRECTORY
    if not commitlog.is_dir():
        raise StoreFormatError(f"{directory}: no commitlog/ directory; not a store")
    return sorted(p for p in commitlog.iterdir() if parse_offset_file_name(p.name) is not None)


def scan_segment(path: Path, *, verify_crc: bool,
                 progress: ProgressCallback | None = None) -> SegmentSummary:
    """Walk every record of one segment file (CRC-checking bodies if asked), past damage."""
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
    size, start = summary.size_bytes, summary.start_position
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
            break
        else:
            resumed = _resume(view, position, summary)
            if resumed is None:
                if result.status is not record.RecordCheck.END:
                    summary.corruptions.append(Corruption(start + position, result.reason))
                break
            reason = result.reason or "zeros where a record was due, with records after"
            summary.corruptions.append(Corruption(
                start + position, f"{reason} (the next record is at {start + resumed})"))
            _advance(progress, resumed - position)
            position = resumed
            continue
        _advance(progress, result.size_bytes)
        position += result.size_bytes
    return position


def _resume(view: mmap.mmap, position: int, summary: SegmentSummary) -> int | None:
    """Where whole records resume after a failure at `position`, or None."""
    written_end = last_nonzero_end(view, position)
    if written_end <= position:
        return None
    return find_record(view, position + 1, written_end, limit=summary.size_bytes,
                       segment_start=summary.start_position)


def _advance(progress: ProgressCallback | None, size_bytes: int) -> None:
    if progress is not None:
        progress(size_bytes)


def scan_store(directory: Path, *, verify_crc: bool,
               progress: ProgressCallback | None = None) -> Iterator[SegmentSummary]:
    for path in segment_paths(directory):
        yield scan_segment(path, verify_crc=verify_crc, progress=progress)


def between_segments(summaries: list[SegmentSummary]) -> list[Corruption]:
    """What only the whole list shows: files of an odd size, missing segments, and a
    segment that stops without a BLANK while a later one holds data."""
    found: list[Corruption] = []
    if not summaries:
        return found
    size = collections.Counter(s.size_bytes for s in summaries).most_common(1)[0][0]
    for summary in summaries:
        if summary.size_bytes != size:
            found.append(Corruption(summary.start_position, f"segment {summary.name} is "
                                    f"{summary.size_bytes} bytes; the others are {size}"))
    for before, after in itertools.pairwise(summaries):
        for start in range(before.start_position + size, after.start_position, size):
            found.append(Corruption(start, f"segment {offset_file_name(start)} is missing"))
    holding = [s for s in summaries if s.record_count or s.corruptions]
    for summary in holding[:-1]:
        if not summary.ends_with_blank and not summary.corruptions:
            found.append(Corruption(summary.written_position,
                                    f"segment {summary.name} ends without a BLANK record "
                                    f"but later segments hold data"))
    return found


def verify_store(directory: Path, *, progress: ProgressCallback | None = None
                 ) -> tuple[list[SegmentSummary], list[Corruption]]:
    """The scrub of `mqstore verify`: every record's CRC, and everything the module
    docstring's table lists."""
    summaries = list(scan_store(directory, verify_crc=True, progress=progress))
    corruptions = [c for summary in summaries for c in summary.corruptions]
    corruptions += between_segments(summaries)
    corruptions.sort(key=lambda c: c.physical_offset)
    corruptions += _checkpoint_damage(directory)
    corruptions += verify_consume_queues(directory, summaries)
    log_end = max((s.written_position for s in summaries if s.record_count), default=0)
    corruptions += _index_damage(directory, log_end)
    return summaries, corruptions


def _checkpoint_damage(directory: Path) -> list[Corruption]:
    state = read_checkpoint(directory / CHECKPOINT_FILE)[1]
    if state is CheckpointState.CORRUPT:
        return [Corruption(-1, "the trailer's checksum fails: recovery will verify the whole "
                               "log", where=CHECKPOINT_FILE)]
    return []


def verify_consume_queues(directory: Path,
                          summaries: list[SegmentSummary]) -> list[Corruption]:
    """Every entry of every consume queue against the record it names."""
    segment_size = summaries[0].size_bytes if summaries else 0
    found: list[Corruption] = []
    with _SegmentBytes(directory, segment_size) as log_bytes:
        for key in list_queues(directory):
            found += _verify_queue_directory(directory, key, log_bytes)
    return found


class _SegmentBytes:
    """Record bytes by position, each segment opened once for the whole check (a queue
    entry at a time would open its segment once per entry)."""

    def __init__(self, directory: Path, segment_size: int) -> None:
        self._directory = directory / COMMITLOG_DIRECTORY
        self.segment_size = segment_size
        self._fds: dict[int, int | None] = {}

    def read(self, physical_offset: int, size_bytes: int) -> bytes | None:
        """The bytes, or None if their segment is gone (retention's, not damage)."""
        size = self.segment_size
        start = physical_offset - physical_offset % size if size else 0
        if start not in self._fds:
            try:
                self._fds[start] = os.open(self._directory / offset_file_name(start),
                                           os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                self._fds[start] = None
        fd = self._fds[start]
        if fd is None or physical_offset < start:
            return None
        return os.pread(fd, size_bytes, physical_offset - start)

    def __enter__(self) -> _SegmentBytes:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for fd in self._fds.values():
            if fd is not None:
                os.close(fd)


def _verify_queue_directory(directory: Path, key: tuple[str, int],
                            log_bytes: _SegmentBytes) -> list[Corruption]:
    files = QueueFiles(queue_directory(directory, key))
    if not files.starts:
        return []
    where = str(files.directory.relative_to(directory))
    if any((files.path(start)).stat().st_size != files.file_size_bytes
           for start in files.starts):
        return [Corruption(-1, "files of different sizes", where=where)]
    return _verify_queue(files, key[1], log_bytes, where=where)


def _verify_queue(files: QueueFiles, queue_id: int, log_bytes: _SegmentBytes, *,
                  where: str) -> list[Corruption]:
    found: list[Corruption] = []
    end = files.written_end()
    rest = files.read_entries(end, files.entries_per_file)
    later_files = [start for start in files.starts if start > files.file_start(end)]
    if rest.tobytes().strip(b"\0") or later_files:
        found.append(Corruption(-1, f"entries from offset {end} on cannot be the indexer's "
                                    f"(written bytes follow an invalid entry)", where=where))
    offset = files.first_real_offset() or 0
    previous = 0
    while offset < end:
        entries = files.read_entries(offset, min(QUEUE_ENTRIES_PER_READ, end - offset))
        if len(entries) == 0:
            found.append(Corruption(-1, f"no file holds offset {offset}", where=where))
            break
        for index, (physical_offset, size, code) in enumerate(
                zip(entries["physical_offset"].tolist(), entries["size"].tolist(),
                    entries["tags_code"].tolist(), strict=True)):
            queue_offset = offset + index
            if is_filler(physical_offset, size):
                continue
            problem = _entry_problem(log_bytes, queue_id=queue_id,
                                     queue_offset=queue_offset, physical_offset=physical_offset,
                                     size_bytes=size, tags_code=code, previous=previous)
            if problem is not None:
                found.append(Corruption(-1, f"offset {queue_offset}: {problem}", where=where))
            previous = physical_offset
        offset += len(entries)
    return found


def _entry_problem(log_bytes: _SegmentBytes, *, queue_id: int, queue_offset: int,
                   physical_offset: int, size_bytes: int, tags_code: int,
                   previous: int) -> str | None:
    if tags_code == DAMAGED_TAGS_CODE:
        return f"its record was lost in damaged bytes at {physical_offset}"
    if physical_offset < previous:
        return f"points at {physical_offset}, before the entry ahead of it ({previous})"
    data = log_bytes.read(physical_offset, size_bytes)
    if data is None:
        return None  # its segment is gone: retention's, not damage
    if not record.holds_entry(data, 0, limit=len(data), physical_offset=physical_offset,
                              size_bytes=size_bytes, queue_id=queue_id,
                              queue_offset=queue_offset):
        return (f"no record of this queue and offset, {size_bytes} bytes long, starts at "
                f"{physical_offset}")
    return None


def _index_damage(directory: Path, log_end_position: int) -> list[Corruption]:
    """Index headers that cannot be the file's: counts beyond what the file's size holds
    (each entry takes 20 bytes besides at least one 4-byte slot), or offsets outside the
    log."""
    found: list[Corruption] = []
    index_directory = directory / INDEX_DIRECTORY
    paths = sorted(index_directory.glob("[0-9]" * 17)) if index_directory.is_dir() else []
    for path in paths:
        with path.open("rb") as file:
            header = file.read(INDEX_HEADER.size)
        where = f"{INDEX_DIRECTORY}/{path.name}"
        if len(header) < INDEX_HEADER.size:
            found.append(Corruption(-1, "shorter than its header", where=where))
            continue
        begin_ms, end_ms, begin, end, slots, count = INDEX_HEADER.unpack(header)
        room = (path.stat().st_size - INDEX_HEADER.size - 4) // 20
        if not (0 <= slots <= max(count, 1) and 0 < count <= room + 1
                and 0 <= begin <= end <= max(log_end_position, 0) and begin_ms <= end_ms):
            found.append(Corruption(-1, f"a header that cannot be this file's: offsets "
                                        f"[{begin}, {end}] (the log ends at "
                                        f"{log_end_position}), index_count {count}, {slots} "
                                        f"slots used", where=where))
    return found


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
