"""The batch reader: `spark.read.format("mqstore").load("/data")`.

`partitions()` runs once in a planner process and returns small picklable `SegmentRange`s
(partitions.py); `read()` runs in the executors' Python workers, maps one segment read-only,
walks its records (walk.py) and yields Arrow record batches (batches.py).  Nothing is written
and no lock is taken, so it may read a live broker's volume (up to the writer's published
committed position) or a copy of it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .batches import record_batches, report
from .options import ReadOptions
from .partitions import SegmentRange, plan_partitions
from .schema import SPARK_SCHEMA
from .store_files import load_store_files, map_segment
from .walk import (
    Corruption,
    RangeBoundaryError,
    Walk,
    WalkStop,
    find_record_start,
    walk_records,
)

log = logging.getLogger(__name__)


def check_schema(schema: StructType | None) -> None:
    if schema is not None and schema != SPARK_SCHEMA:
        raise ValueError(f"mqstore: the schema is fixed ({SPARK_SCHEMA.simpleString()}); "
                         f"select columns instead of passing .schema(...)")


class MqstoreReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        files = load_store_files(self.options.directory)
        return list(plan_partitions(files, self.options.selection,
                                    max_partition_bytes=self.options.max_partition_bytes))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark turns an empty plan into one `InputPartition(None)` and still reads it.
        if not isinstance(partition, SegmentRange):
            return iter(())
        return read_range(partition, self.options)


def read_range(part: SegmentRange, options: ReadOptions) -> Iterator[pa.RecordBatch]:
    """The rows of one planned range."""
    mapping = map_segment(part.directory, part.segment_start)
    if mapping is None:
        log.warning("mqstore: segment %d of %s was deleted (retention) after planning",
                    part.segment_start, part.directory)
        return
    try:
        view = memoryview(mapping)
        try:
            yield from _read_mapped(view, part, options)
        finally:
            view.release()
    finally:
        with contextlib.suppress(BufferError):  # an array still refers to it: GC unmaps
            mapping.close()


def _read_mapped(view: memoryview, part: SegmentRange,
                 options: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Walk the range and decode its records.  Damage (a record that cannot be walked, or
    zeros where a record was due with records after them) fails the query under
    `onCorruptRecord=fail`; under `skip` it is logged and the walk resumes at the next whole
    record (`find_record_start`), as the engine's reads do: one bad byte never costs the
    records after it."""
    base = part.segment_start
    limit = max(0, min(len(view), part.committed_position - base))
    position = find_record_start(view, base=base, from_position=part.range_start, limit=limit)
    while position is not None and position < part.range_end:
        walk = walk_records(view, base=base, range_start=position, range_end=part.range_end,
                            limit=limit)
        if walk.stop is WalkStop.RANGE_END and walk.stop_position < limit:
            _check_boundary(view, part, walk_from=position, walk=walk, limit=limit)
        yield from record_batches(view, directory=part.directory, base=base,
                                  starts=walk.starts, selection=options.selection,
                                  verify_crc=options.verify_crc, on_corrupt=options.on_corrupt,
                                  batch_rows=options.batch_rows)
        damage = walk.corruption
        if damage is None and walk.stop is WalkStop.END:
            damage = _zeros_before_records(view, base=base, at=walk.stop_position, limit=limit)
        if damage is None:
            return
        report(part.directory, [damage], options.on_corrupt)
        position = find_record_start(view, base=base, from_position=walk.stop_position + 1,
                                     limit=limit)
        log.warning("mqstore: segment %d: damaged bytes from %d skipped; %s", base,
                    damage.physical_offset,
                    "no whole record after them" if position is None
                    else f"records resume at {base + position}")


def _zeros_before_records(view: memoryview, *, base: int, at: int,
                          limit: int) -> Corruption | None:
    """Zeros where the walk stopped are the segment's unwritten tail, unless a whole record
    follows them: then they are damage (a lost page)."""
    if limit - at < 8 or find_record_start(view, base=base, from_position=at + 1,
                                           limit=limit) is None:
        return None
    return Corruption(base + at, "zeros where a record was due")


def _check_boundary(view: memoryview, part: SegmentRange, *, walk_from: int, walk: Walk,
                    limit: int) -> None:
    base = part.segment_start
    following = find_record_start(view, base=base, from_position=part.range_end, limit=limit)
    if following != walk.stop_position:
        raise RangeBoundaryError(
            f"{part.directory}: segment {base}: the walk from {base + walk_from} reached a "
            f"record at {base + walk.stop_position}, but the range from "
            f"{base + part.range_end} starts at {following}; read with a "
            f"maxPartitionBytes of at least the segment size")
