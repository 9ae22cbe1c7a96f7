"""Retention (RocketMQ `CleanCommitLogService` + `CleanConsumeQueueService`).

Every `clean_interval_ms` the service measures the disk under the store and decides:

| disk used (ceil to 1%)          | effect                                                  |
|---------------------------------|---------------------------------------------------------|
| > disk_warning_ratio (0.90)     | writes refused (SERVICE_NOT_AVAILABLE, with the figure) |
|                                 | and segments deleted oldest-first regardless of age      |
| > disk_clean_forcibly_ratio     | segments deleted oldest-first regardless of age          |
| > disk_max_used_ratio (0.75)    | expired segments deleted now, not only at delete hours   |
| otherwise                       | expired segments deleted during `delete_hours`           |

A segment is expired when its file was last modified more than `file_retention_hours` ago.
The active (last) segment is never deleted, nor a segment with unsynced bytes, nor one the
indexer has not dispatched to its end (`dispatched_position`: with the indexer down or
behind, the disk fills and writes are refused rather than records lost to the consume
queues); at most `delete_segments_per_pass_max` go per pass.  A deleted segment a reader
holds stays mapped until the reader releases it.  Then `on_min_position` tells the indexer
(embedded; an indexer process reads the new start in `positions`), whose queues drop files
that point only below the new minimum and whose index drops files that end below it.
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..config import StoreConfig
from ..files.segment import CommitLogSegment
from ..service_thread import FatalHandler, ServiceThread
from .segment_list import SegmentList

log = logging.getLogger(__name__)

DiskUsage = Callable[[Path], float]
OnDiskFull = Callable[[str | None], None]
"""Called with the reason writes are refused, or None when they may resume."""


def disk_usage_bytes(path: Path) -> tuple[int, int]:
    """(used, capacity) of the file system under `path`, capacity = used + available to us
    (blocks reserved for root count for neither: we can never fill them)."""
    stats = os.statvfs(path)
    used = (stats.f_blocks - stats.f_bfree) * stats.f_frsize
    available = stats.f_bavail * stats.f_frsize
    return used, used + available


def disk_used_ratio(path: Path) -> float:
    """used / (used + available to us), rounded up to 1% as RocketMQ does."""
    used, capacity = disk_usage_bytes(path)
    if capacity == 0:
        return 0.0
    return math.ceil(100 * used / capacity) / 100


def is_delete_hour(now: datetime.datetime, hours: tuple[int, ...]) -> bool:
    return now.hour in hours


class RetentionService(ServiceThread):
    name = "retention"

    def __init__(self, segment_list: SegmentList, config: StoreConfig, *,
                 on_disk_full: OnDiskFull, on_min_position: Callable[[int], None] | None,
                 dispatched_position: Callable[[], int], on_fatal: FatalHandler,
                 disk_usage: DiskUsage = disk_used_ratio) -> None:
        super().__init__(on_fatal=on_fatal)
        self._segment_list = segment_list
        self._dispatched_position = dispatched_position
        self._config = config
        self._on_disk_full = on_disk_full
        self._on_min_position = on_min_position
        self._disk_usage = disk_usage
        self.segments_deleted_total = 0
        self.bytes_deleted_total = 0
        self.disk_used_ratio = 0.0

    def run_once(self) -> None:
        self.wait_for_running(self._config.clean_interval_ms)
        if not self.stopping:
            self.clean()

    def clean(self, *, now: datetime.datetime | None = None) -> list[CommitLogSegment]:
        """One pass: measure the disk, refuse or allow writes, delete what is due."""
        config = self._config
        ratio = self._disk_usage(self._segment_list.directory)
        self.disk_used_ratio = ratio
        if ratio > config.disk_warning_ratio:
            self._on_disk_full(f"disk {ratio:.0%} used, above disk_warning_ratio "
                               f"{config.disk_warning_ratio:.0%}; deleting old segments")
        else:
            self._on_disk_full(None)
        force = ratio > config.disk_clean_forcibly_ratio
        due = force or ratio > config.disk_max_used_ratio or is_delete_hour(
            now or datetime.datetime.now(), config.delete_hours)
        if not due:
            return []
        reserved_s = config.file_retention_hours * 3600
        wall_s = time.time()
        dispatched = self._dispatched_position()
        removed = self._segment_list.delete_oldest(
            count_max=config.delete_segments_per_pass_max,
            expired=lambda segment: segment.end_position <= dispatched and (
                force or _age_s(segment, wall_s) > reserved_s))
        if removed:
            self._after_delete(removed)
        return removed

    def _after_delete(self, removed: list[CommitLogSegment]) -> None:
        self.segments_deleted_total += len(removed)
        self.bytes_deleted_total += sum(segment.size_bytes for segment in removed)
        minimum = self._segment_list.min_position
        log.info("retention deleted %d segments; the log now starts at %d", len(removed),
                 minimum)
        if self._on_min_position is not None:
            self._on_min_position(minimum)


def _age_s(segment: CommitLogSegment, now_s: float) -> float:
    return now_s - segment.path.stat().st_mtime
