"""`LogCheckpointer`: what the writer records after the commit log's syncs.

After a sync (the async flush service's or the group commit's), at most every
`checkpoint_interval_ms` and once more on close:

* the checkpoint's log time and flushed position: the *durable position* below which
  recovery never cuts (recovery/recovery.py);
* the writer's queue offset snapshot (files/queue_offsets_file.py), the one taken at the
  previous checkpoint, once the log is synced past its position: so the file never claims a
  record a power loss could take.  Written only when the offsets moved.  A follower writes
  none: it stamps no queue offsets, its master does.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..config import StoreConfig
from ..files.checkpoint import Checkpoint
from ..files.queue_offsets_file import QueueOffsetsSnapshot, write_queue_offsets
from .commitlog import CommitLog
from .segment_list import SegmentList


class LogCheckpointer:
    def __init__(self, directory: Path, config: StoreConfig, *, checkpoint: Checkpoint,
                 segment_list: SegmentList, commitlog: CommitLog) -> None:
        self._directory = directory
        self._config = config
        self._checkpoint = checkpoint
        self._segment_list = segment_list
        self._commitlog = commitlog
        self._snapshots = config.role.is_master
        self._pending: QueueOffsetsSnapshot | None = None
        self._written: QueueOffsetsSnapshot | None = None
        self._last_ms = 0.0
        self._lock = threading.Lock()

    def on_flushed(self, *, force: bool = False) -> None:
        """After a sync; `force` on close (everything is synced then)."""
        now_ms = time.monotonic() * 1000
        if not force and now_ms - self._last_ms < self._config.checkpoint_interval_ms:
            return
        with self._lock:
            self._last_ms = now_ms
            values = self._checkpoint.values
            values.physic_msg_timestamp_ms = self._segment_list.flushed_store_timestamp_ms
            values.master_flushed_offset = self._segment_list.flushed_position
            self._checkpoint.write()
            if self._snapshots:
                self._snapshot(force=force)

    def _snapshot(self, *, force: bool) -> None:
        if force:
            self._pending = QueueOffsetsSnapshot(*self._commitlog.snapshot_queue_offsets())
        pending = self._pending
        flushed = self._segment_list.flushed_position
        if pending is not None and pending.position <= flushed and (
                self._written is None or pending.offsets != self._written.offsets):
            write_queue_offsets(self._directory, pending)
            self._written = pending
        if not force:
            self._pending = QueueOffsetsSnapshot(*self._commitlog.snapshot_queue_offsets())
