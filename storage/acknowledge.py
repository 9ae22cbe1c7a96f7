"""Acknowledging puts under sync flush: park the caller, or complete later, once synced.

A put returns PUT_OK only after the group commit synced its end position.  Past
`sync_flush_timeout_ms` (or when the store stopped after a failed sync) every result of the
put becomes FLUSH_DISK_TIMEOUT with the reason: it was written, but its sync was not seen.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import StoreConfig
from .flush import GroupCommitService
from .message import PutResult, PutStatus


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


def _end(results: list[PutResult]) -> int:
    last = results[-1]
    return last.physical_offset + last.size_bytes
