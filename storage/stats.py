"""`StoreStats`: running totals of the engine's background work, for whoever reports them.

Each total lives where the work happens and is written by that one thread only (the
allocator thread, the flush/commit services through `SegmentList.flush`, the retention
service); `MessageStore.stats` copies them into this value when asked (the writer's /metrics
does, at scrape time).  Reads take no lock: an int or float attribute is never torn, and a
total read a moment late is still a total.  They count since this process opened the store.

    segments_preallocated_total     commit log segment files created at full size
    preallocation_seconds_total     wall time spent creating them (file, mapping, warm-up)
    flush_syncs_total               fdatasyncs of commit log segments that moved the flushed
                                    position (async flush and group commit alike)
    retention_deleted_segments_total  segments retention deleted
    retention_deleted_bytes_total   their sizes
    recovery_mode                   how this open recovered: empty, normal, abnormal or full
    recovery_truncated_bytes        bytes recovery cut off the log's tail at this open
"""

from __future__ import annotations

import dataclasses

from .recovery.recovery import RecoveryMode


@dataclasses.dataclass(frozen=True)
class StoreStats:
    segments_preallocated_total: int
    preallocation_seconds_total: float
    flush_syncs_total: int
    retention_deleted_segments_total: int
    retention_deleted_bytes_total: int
    recovery_mode: RecoveryMode
    recovery_truncated_bytes: int

    def __post_init__(self) -> None:
        assert self.segments_preallocated_total >= 0
        assert self.preallocation_seconds_total >= 0
        assert self.retention_deleted_bytes_total >= self.retention_deleted_segments_total
        assert self.recovery_truncated_bytes >= 0
