"""Planning a batch read: one input partition per segment, or per byte range of one, and the
segments a selection cannot match are never read.

Pruning, from what the planner knows without reading records (store_files.py):

* physical offsets: a segment holds [start, start + segment size);
* store times: records are stamped under the put lock, so store times rise along the log
  (RocketMQ's time lookups assume the same): every record of segment i was stored within
  [first store time of i, first store time of i + 1].  A clock stepped back by more than the
  gap between two segments could hide records from a time range: the rows themselves are
  still filtered exactly, but a pruned segment is not read at all;
* topics and queues are not pruned here (a segment's topics are known only by reading it);
  they are filtered while decoding, before bodies are copied.

A segment larger than `max_partition_bytes` becomes record-aligned ranges (walk.py says how
ranges meet); the ranges are planned by size alone, so planning reads no records.
"""

from __future__ import annotations

import dataclasses
import itertools

from pyspark.sql.datasource import InputPartition

from .options import Selection
from .store_files import SegmentInfo, StoreFiles


@dataclasses.dataclass(frozen=True)
class SegmentRange(InputPartition):
    """Records starting in [range_start, range_end) of one segment (positions relative to
    the segment), readable up to `committed_position` (absolute)."""

    directory: str
    segment_start: int
    range_start: int
    range_end: int
    committed_position: int

    def __post_init__(self) -> None:
        assert 0 <= self.range_start < self.range_end
        assert self.segment_start >= 0


def _may_match(segment: SegmentInfo, following: SegmentInfo | None, *, size_bytes: int,
               selection: Selection, committed_position: int) -> bool:
    start = segment.start_position
    if start >= committed_position or segment.first_store_timestamp_ms is None:
        return False
    if start + size_bytes <= selection.physical_offset_start:
        return False
    if start >= selection.physical_offset_end:
        return False
    time_end = selection.store_timestamp_end_ms
    if time_end is not None and segment.first_store_timestamp_ms >= time_end:
        return False
    time_start = selection.store_timestamp_start_ms
    last_bound_ms = following.first_store_timestamp_ms if following is not None else None
    return time_start is None or last_bound_ms is None or last_bound_ms >= time_start


def plan_partitions(files: StoreFiles, selection: Selection, *,
                    max_partition_bytes: int) -> list[SegmentRange]:
    """The input partitions of a read, in log order."""
    assert max_partition_bytes > 0
    size = files.segment_size_bytes
    planned: list[SegmentRange] = []
    segments = files.segments
    for index, segment in enumerate(segments):
        following = segments[index + 1] if index + 1 < len(segments) else None
        if not _may_match(segment, following, size_bytes=size, selection=selection,
                          committed_position=files.committed_position):
            continue
        data_bytes = min(size, files.committed_position - segment.start_position)
        lower = max(0, selection.physical_offset_start - segment.start_position)
        # Ranges are cut by size alone: each task finds its first record (walk.py).  The
        # last range reaches the segment's end; ranges wholly below the selection's start
        # are dropped.
        range_count = max(1, -(-data_bytes // max_partition_bytes))
        step = -(-data_bytes // range_count)
        cuts = [cut * step for cut in range(range_count)] + [size]
        for range_start, range_end in itertools.pairwise(cuts):
            if range_end <= lower:
                continue
            planned.append(SegmentRange(files.directory, segment.start_position, range_start,
                                        range_end, files.committed_position))
    return planned
