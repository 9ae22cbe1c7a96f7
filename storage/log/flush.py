"""The commit service and the two flush services (RocketMQ `CommitLog`'s service threads).

* `CommitService` (pool on): copies pooled bytes into the file every `commit_interval_ms`
  when at least `commit_pages_min` pages are pending, or after `commit_thorough_interval_ms`.
* `AsyncFlushService` (async flush): fdatasync every `flush_interval_ms` when at least
  `flush_pages_min` pages are dirty, or after `flush_thorough_interval_ms`.
* `GroupCommitService` (sync flush): producers park on a lock until their end position is
  synced; one fdatasync covers every producer that arrived while the previous one ran.  With
  the pool on it commits on demand first, so a parked producer never waits for the commit
  service's thresholds (the latency cliff of RocketMQ #1372).  With
  `group_commit_align_bytes` it first seals the group (`CommitLog.seal_group`: a filler up
  to the boundary) and counts as flushed exactly the sealed group.

Every sync is `os.fdatasync`, which releases the GIL.  A failed sync raises out of `run_once`,
which `ServiceThread` turns into a store stop.
"""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from ..config import PAGE_SIZE_BYTES, StoreConfig
from ..service_thread import FatalHandler, ServiceThread
from .pool import TransientStorePool
from .segment_list import SegmentList

OnFlushed = Callable[[], None]


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class CommitService(ServiceThread):
    name = "commit"

    def __init__(self, segment_list: SegmentList, pool: TransientStorePool, config: StoreConfig, *,
                 on_committed: Callable[[], None] | None, on_fatal: FatalHandler) -> None:
        super().__init__(on_fatal=on_fatal)
        self._segment_list = segment_list
        self._pool = pool
        self._config = config
        self._last_commit_ms = _monotonic_ms()
        self._due_bytes = max(1, config.commit_pages_min * PAGE_SIZE_BYTES)
        self._segment_size_bytes = segment_list.segment_size_bytes
        self._on_committed = on_committed
        """Called after a commit moved bytes into the files (the replication sender's wakeup:
        with the pool on, readers see only committed bytes)."""

    def run_once(self) -> None:
        config = self._config
        now_ms = _monotonic_ms()
        pages_min = config.commit_pages_min
        if now_ms - self._last_commit_ms >= config.commit_thorough_interval_ms:
            pages_min = 0
        if self._segment_list.commit(pages_min=pages_min, return_buffer=self._pool.give_back):
            self._last_commit_ms = now_ms
            if self._on_committed is not None:
                self._on_committed()
        self.wait_for_running(config.commit_interval_ms)

    def wake_if_due(self, end_position: int) -> None:
        """After an append ending at `end_position`: wake the service only once
        `commit_pages_min` pages wait (it commits no sooner anyway).  A wakeup per append
        cost each put a thread switch (the service takes the GIL only to find too little to
        commit), and a producer that commits on demand (sync replication) leaves nothing for
        it at all."""
        committed = self._segment_list.commit_cursor
        # Also when a segment filled (rolled): its buffer goes back to the pool only once
        # it is committed to the end, and the next roll may need it.
        if end_position - committed >= self._due_bytes or \
                committed < end_position - end_position % self._segment_size_bytes:
            self.wakeup()

    def wake_if_rolled(self, end_position: int) -> None:
        """After an append on a sync master, whose sender commits on demand before every
        read (replication.py): wake the service only for a filled segment (its buffer goes
        back to the pool once committed to the end).  Woken for due pages as well, it
        committed beside the sender, contending for the commit lock and the GIL: measured,
        the sync-master p99 at 16 connections rose by a third.  With no follower reading,
        its `commit_interval_ms` pass commits (and such puts are SLAVE_NOT_AVAILABLE)."""
        rolled_at = end_position - end_position % self._segment_size_bytes
        if self._segment_list.commit_cursor < rolled_at:
            self.wakeup()

    def commit_now(self, *, notify: bool = True) -> bool:
        """Commit everything written; `notify=False` for a caller about to read the bytes
        itself (the replication sender), which needs no wakeup for them."""
        moved = self._segment_list.commit(pages_min=0, return_buffer=self._pool.give_back)
        if moved and notify and self._on_committed is not None:
            self._on_committed()
        return moved

    def shutdown_drain(self) -> None:
        for _ in range(self._config.shutdown_retries_max):
            self.commit_now()
            if self._segment_list.committed_position == self._segment_list.written_position:
                return
        raise RuntimeError("commit did not catch up with the written position on shutdown")


class AsyncFlushService(ServiceThread):
    name = "flush"

    def __init__(self, segment_list: SegmentList, config: StoreConfig, *, on_flushed: OnFlushed,
                 on_fatal: FatalHandler) -> None:
        super().__init__(on_fatal=on_fatal)
        self._segment_list = segment_list
        self._config = config
        self._on_flushed = on_flushed
        self._last_thorough_ms = _monotonic_ms()

    def run_once(self) -> None:
        config = self._config
        # `flushCommitLogTimed`: a plain periodic sleep, not woken per put, so a busy put
        # path never turns into one fdatasync per message.
        self.wait_for_running(config.flush_interval_ms)
        now_ms = _monotonic_ms()
        pages_min = config.flush_pages_min
        if now_ms - self._last_thorough_ms >= config.flush_thorough_interval_ms:
            pages_min = 0
            self._last_thorough_ms = now_ms
        if self._segment_list.flush(pages_min=pages_min):
            self._on_flushed()

    def shutdown_drain(self) -> None:
        for _ in range(self._config.shutdown_retries_max):
            self._segment_list.flush(pages_min=0)
            if self._segment_list.flushed_position == self._segment_list.committed_position:
                self._on_flushed()
                return
        raise RuntimeError("flush did not catch up with the committed position on shutdown")


class GroupCommitStats(NamedTuple):
    syncs_total: int
    """fdatasyncs that moved the flushed position: bytes per group = flushed bytes / this."""
    padding_count: int
    """Filler records written to align groups (`group_commit_align_bytes`)."""
    padding_bytes_total: int


Completion = Callable[[bool], None]
SealGroup = Callable[[], tuple[int, int]]
"""`CommitLog.seal_group`: pad to the alignment, return (group end position, its store time)."""
"""Called by the group commit thread with True once synced, False on timeout or failure."""


class GroupCommitService(ServiceThread):
    """Sync flush.  Producers either park (`wait_flushed`) or register a completion
    (`submit`, for callers that must not block, like an event loop); the thread syncs once
    for every request that arrived while the previous sync ran, then completes them."""

    name = "group-commit"

    def __init__(self, segment_list: SegmentList, config: StoreConfig, *,
                 commit: Callable[[], bool] | None, seal: SealGroup | None,
                 on_flushed: OnFlushed, on_fatal: FatalHandler) -> None:
        super().__init__(on_fatal=on_fatal)
        self._segment_list = segment_list
        self._config = config
        self._commit = commit
        self._seal = seal
        self.syncs_total = 0
        """fdatasyncs that moved the flushed position (bytes per group = flushed / this)."""
        self._on_flushed = on_flushed
        self._requests: list[tuple[int, float, Completion]] = []
        self._requests_lock = threading.Lock()
        self.failed = False

    def wait_flushed(self, end_position: int, *, timeout_s: float) -> bool:
        """Block until [.., end_position) is synced; False on timeout or store failure."""
        if self._segment_list.flushed_position >= end_position:
            return True
        parked = _thread.allocate_lock()
        parked.acquire()
        if not self.submit(end_position, timeout_s=timeout_s,
                           on_done=lambda _synced: parked.release()):
            return False
        return parked.acquire(timeout=timeout_s) and not self.failed

    def submit(self, end_position: int, *, timeout_s: float, on_done: Completion) -> bool:
        """Register `on_done` for when [.., end_position) is synced; False (and `on_done`
        is never called) if the service has failed or is stopping."""
        with self._requests_lock:
            if self.failed or self.stopping:
                return False
            self._requests.append((end_position, time.monotonic() + timeout_s, on_done))
        self.wakeup()
        return True

    def run_once(self) -> None:
        self.wait_for_running(10)
        with self._requests_lock:
            requests, self._requests = self._requests, []
        try:
            self._sync(max((end for end, _, _ in requests), default=0))
        except BaseException:
            self.failed = True  # before completing: a woken producer must see it
            for _, _, on_done in requests:
                on_done(False)
            raise
        flushed = self._segment_list.flushed_position
        now = time.monotonic()
        waiting = []
        for request in requests:
            end, deadline, on_done = request
            if now >= deadline:
                # Synced or not, the answer came too late: FLUSH_DISK_TIMEOUT, as the
                # blocking put that stopped waiting at the deadline reported.
                on_done(False)
            elif flushed >= end:
                on_done(True)
            else:
                waiting.append(request)
        if waiting:
            with self._requests_lock:
                self._requests[:0] = waiting
            self.wakeup()

    def _sync(self, target_position: int) -> None:
        # A record may have rolled into the next segment: commit and flush walk forward,
        # and one more pass picks up anything written while the first sync ran.
        for _ in range(2):
            group_end = self._seal() if self._seal is not None else None
            if self._commit is not None:
                self._commit()
            if self._segment_list.flush(pages_min=0, group_end=group_end):
                self.syncs_total += 1
                self._on_flushed()
            if self._segment_list.flushed_position >= target_position:
                return

    def fail_all(self) -> None:
        """The store stopped: complete every pending request as not synced."""
        with self._requests_lock:
            self.failed = True
            requests, self._requests = self._requests, []
        for _, _, on_done in requests:
            on_done(False)

    def shutdown_drain(self) -> None:
        for _ in range(self._config.shutdown_retries_max):
            self._sync(self._segment_list.written_position)
            if self._segment_list.flushed_position == self._segment_list.written_position:
                break
        with self._requests_lock:
            requests, self._requests = self._requests, []
        flushed = self._segment_list.flushed_position
        for end, _, on_done in requests:
            on_done(flushed >= end)
        if flushed != self._segment_list.written_position:
            raise RuntimeError("group commit did not sync everything written on shutdown")
