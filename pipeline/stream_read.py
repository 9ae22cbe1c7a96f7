"""Reading one streaming partition: a consume queue offset range, resolved to records.

The entries give each record's position and size; the records are read from the commit log
segment by segment and decoded in bulk (batches.py), each checked against its entry (queue id,
queue offset, size), so an entry that does not describe its record is a corrupt record with
its offset, never a wrong row.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from .batches import Expected, record_batches
from .options import ReadOptions
from .queue_scan import DataLossError, read_entries
from .store_files import map_segment


@dataclasses.dataclass(frozen=True)
class QueueRange(InputPartition):
    """Offsets [start_offset, end_offset) of one consume queue."""

    directory: str
    topic: str
    queue_id: int
    start_offset: int
    end_offset: int
    segment_size_bytes: int
    from_earliest: bool = False
    """Offsets retention deleted are skipped, not a data loss (a queue first seen now)."""


def read_queue_range(part: QueueRange, options: ReadOptions) -> Iterator[pa.RecordBatch]:
    offsets, entries = read_entries(part.directory, (part.topic, part.queue_id),
                                    start_offset=part.start_offset, end_offset=part.end_offset,
                                    from_earliest=part.from_earliest)
    if len(offsets) == 0:
        return
    segment_size = part.segment_size_bytes
    positions = entries["physical_offset"].astype(np.int64)
    sizes = entries["size"].astype(np.int64)
    segment_of = positions // segment_size
    cuts = np.flatnonzero(np.diff(segment_of)) + 1
    for chunk in np.split(np.arange(len(offsets)), cuts):
        segment_start = int(segment_of[chunk[0]]) * segment_size
        yield from _read_segment(part, options, segment_start, positions[chunk] - segment_start,
                                 Expected(part.topic, part.queue_id, offsets[chunk],
                                          sizes[chunk]))


def _read_segment(part: QueueRange, options: ReadOptions, segment_start: int,
                  starts: np.ndarray, expected: Expected) -> Iterator[pa.RecordBatch]:
    mapping = map_segment(part.directory, segment_start)
    if mapping is None:
        if part.from_earliest:
            return
        raise DataLossError(f"{part.directory}: the segment at {segment_start} holding "
                            f"{part.topic}/{part.queue_id} offset {expected.queue_offsets[0]} "
                            f"was deleted by retention before it was read")
    try:
        view = memoryview(mapping)
        try:
            if int(starts[-1] + expected.sizes[-1]) > len(view) or int(starts.min()) < 0:
                raise DataLossError(f"{part.directory}: consume queue {part.topic}/"
                                    f"{part.queue_id} points past segment {segment_start}")
            yield from record_batches(view, directory=part.directory, base=segment_start,
                                      starts=starts, selection=None,
                                      verify_crc=options.verify_crc,
                                      on_corrupt=options.on_corrupt,
                                      batch_rows=options.batch_rows, expected=expected)
        finally:
            view.release()
    finally:
        with contextlib.suppress(BufferError):
            mapping.close()
