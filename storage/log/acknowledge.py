"""Acknowledging puts: at once, after the group commit's sync, after a follower's copy, or both.

`SyncAcknowledger` (sync flush): a put returns PUT_OK only after the group commit synced its
end position.  Past `sync_flush_timeout_ms` (or when the store stopped after a failed sync)
every result of the put becomes FLUSH_DISK_TIMEOUT with the reason: it was written, but its
sync was not seen.

`PutAcknowledger` joins that with the sync master's `FollowerAcknowledger` (follower_sync.py):
both run at once, and the answer comes when both are done.  As in RocketMQ (the flush and
follower futures combined), a flush failure wins: FLUSH_DISK_TIMEOUT, else FLUSH_SLAVE_TIMEOUT
or SLAVE_NOT_AVAILABLE, else PUT_OK.  Every outcome but PUT_OK still leaves the message
stored and readable on this store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol, TypeVar

from ..config import StoreConfig
from ..format.message import PutResult, PutStatus
from .flush import GroupCommitService

T = TypeVar("T")
Outcome = tuple[PutStatus, str] | None
"""Of a follower wait: None when replicated; else the status and reason the results get."""


class FollowerAcknowledger(Protocol):
    """The replication half (a sync master's `follower_sync.FollowerAcknowledger`)."""

    def submit(self, results: list[PutResult], on_done: Callable[[Outcome], None]) -> None: ...

    def wait(self, results: list[PutResult]) -> Outcome: ...


class SyncAcknowledger:
    def __init__(self, group_commit: GroupCommitService, config: StoreConfig, *,
                 failure: Callable[[], str | None]) -> None:
        self._group_commit = group_commit
        self._config = config
        self._failure = failure
        self._timeout_s = config.sync_flush_timeout_ms / 1000

    def wait(self, results: list[PutResult]) -> None:
        """Block until the last result's record is synced, or mark them all timed out."""
        if not self._group_commit.wait_flushed(_end(results), timeout_s=self._timeout_s):
            self._mark_not_synced(results)

    def submit(self, results: list[PutResult], resolve: Callable[[], None]) -> None:
        """Call `resolve` from the group commit thread once synced (or marked timed out)."""

        def on_done(synced: bool) -> None:
            if not synced:
                self._mark_not_synced(results)
            resolve()

        if not self._group_commit.submit(_end(results), timeout_s=self._timeout_s,
                                         on_done=on_done):
            on_done(False)

    def _mark_not_synced(self, results: list[PutResult]) -> None:
        reason = (self._failure() or f"not synced within {self._config.sync_flush_timeout_ms} "
                                     f"ms (sync_flush_timeout_ms)")
        for result in results:
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
            result.reason = reason


class PutAcknowledger:
    """What a PUT_OK append waits for before it is answered (nothing, when neither is set)."""

    def __init__(self, *, flush: SyncAcknowledger | None,
                 follower: FollowerAcknowledger | None) -> None:
        self._flush = flush
        self._follower = follower
        self.waits = flush is not None or follower is not None
        """False: every put is answered as it returns from the append."""

    def wait(self, results: list[PutResult]) -> None:
        """Block until the results are acknowledged; their statuses then say how."""
        if not results or results[-1].status is not PutStatus.PUT_OK:
            return
        if self._follower is None:
            if self._flush is not None:
                self._flush.wait(results)
            return
        if self._flush is None:
            _apply(results, self._follower.wait(results))
            return
        # Both: replication registers first (committing on demand and waking the sender),
        # so the follower copies while this thread waits for the sync.
        join = _Join(results, parts=2, resolve=None)
        self._follower.submit(results, join.arrive)
        self._flush.wait(results)
        join.arrive(None)
        join.wait()

    def submit(self, results: list[PutResult], value: T) -> Future[T]:
        """A future of `value`, completed once the results are acknowledged (at once if there
        is nothing to wait for), from whichever thread finishes last."""
        future: Future[T] = Future()
        self.then(results, lambda: future.set_result(value))
        return future

    def then(self, results: list[PutResult], on_done: Callable[[], None]) -> None:
        """Call `on_done` once the results are acknowledged: at once if there is nothing to
        wait for, else from whichever thread finishes last (the group commit's, or the one
        that took a follower's confirmation)."""
        if not self.waits or not results or results[-1].status is not PutStatus.PUT_OK:
            on_done()
            return
        if self._follower is None:
            assert self._flush is not None
            self._flush.submit(results, on_done)  # no join for one part
            return
        parts = (self._flush is not None) + (self._follower is not None)
        join = _Join(results, parts=parts, resolve=on_done)
        self._follower.submit(results, join.arrive)
        if self._flush is not None:
            self._flush.submit(results, lambda: join.arrive(None))


class _Join:
    """Waits for `parts` arrivals; the follower's outcome is applied after the flush's, so
    FLUSH_DISK_TIMEOUT (set by the flush half) is never overwritten."""

    __slots__ = ("_done", "_left", "_lock", "_outcome", "_resolve", "_results")

    def __init__(self, results: list[PutResult], *, parts: int,
                 resolve: Callable[[], None] | None) -> None:
        assert parts > 0
        self._results = results
        self._left = parts
        self._outcome: Outcome = None
        self._lock = threading.Lock()
        self._resolve = resolve
        self._done = threading.Event() if resolve is None else None

    def arrive(self, outcome: Outcome) -> None:
        with self._lock:
            if outcome is not None:
                self._outcome = outcome
            self._left -= 1
            last = self._left == 0
        if not last:
            return
        _apply(self._results, self._outcome)
        if self._resolve is not None:
            self._resolve()
        else:
            assert self._done is not None
            self._done.set()

    def wait(self) -> None:
        assert self._done is not None
        self._done.wait()


def _apply(results: list[PutResult], outcome: Outcome) -> None:
    if outcome is None or results[-1].status is not PutStatus.PUT_OK:
        return
    status, reason = outcome
    for result in results:
        result.status = status
        result.reason = reason


def _end(results: list[PutResult]) -> int:
    last = results[-1]
    return last.physical_offset + last.size_bytes
