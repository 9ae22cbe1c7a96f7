"""Verify job: the CRC scrub of `mqstore verify`, one Spark task per segment.

Each task runs the engine's own scrub of one segment (`scan_segment` of
storage/recovery/scrub.py, with CRC checks: magic, sizes, PHYSICALOFFSET, body CRC, a non-zero
tail after the last record); the driver then applies `verify_store`'s rules across segments
(`between_segments`: files of an odd size, missing segments, a segment that stops without a
BLANK while a later one holds data).  The consume queue and index checks of `mqstore verify`
are not part of this job: it scrubs the commit log.  Read-only, no lock.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pyspark.sql import SparkSession

from mqstore.storage.recovery.scrub import (
    Corruption,
    SegmentSummary,
    between_segments,
    scan_segment,
    segment_paths,
)


@dataclasses.dataclass(frozen=True)
class VerifyResult:
    segments: int
    records: int
    corruptions: list[Corruption]

    @property
    def clean(self) -> bool:
        return not self.corruptions


def _scan(path: str) -> SegmentSummary:
    return scan_segment(Path(path), verify_crc=True)


def verify(spark: SparkSession, directory: str) -> VerifyResult:
    paths = [str(path) for path in segment_paths(Path(directory))]
    if not paths:
        return VerifyResult(segments=0, records=0, corruptions=[])
    context = spark.sparkContext
    summaries = context.parallelize(paths, len(paths)).map(_scan).collect()
    summaries.sort(key=lambda summary: summary.start_position)
    found = [c for summary in summaries for c in summary.corruptions]
    found += between_segments(summaries)
    return VerifyResult(segments=len(summaries),
                        records=sum(summary.record_count for summary in summaries),
                        corruptions=sorted(found, key=lambda c: c.physical_offset))
