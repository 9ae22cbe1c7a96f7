"""`DispatchService`: the dispatch thread, which runs the dispatcher's passes (dispatcher.py).

It waits between passes on an event, or, in an indexer process, on the writer's doorbell
(storage/files/doorbell.py): the writer's ring then wakes this thread itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..config import StoreConfig
from ..files.doorbell import DoorbellReceiver
from ..service_thread import FatalHandler, ServiceThread
from .dispatcher import Dispatcher, Listener
from .stalled_queue import DISK_FULL_ERRNOS

log = logging.getLogger(__name__)


class DispatchService(ServiceThread):
    """Passes until caught up, then a wait for a wakeup: `dispatch_interval_ms` (each pass
    costs a positions read and a notice batch), `idle_wait_ms` once a pass found nothing.
    A full disk (ENOSPC, EDQUOT creating a consume queue or index file) stalls dispatch
    instead of stopping the store: it retries every `dispatch_retry_interval_ms` and says why
    in `stalled_reason` (re-dispatching is idempotent, so a half-done record is safe to
    repeat).  Any other file-system error on one queue's files stalls only that queue, and
    its records are put again every `stalled_queue_retry_interval_ms`
    (`Dispatcher.replay_stalled`).
    Anything else that fails is fatal."""

    name = "dispatch"

    def __init__(self, dispatcher: Dispatcher, config: StoreConfig, *,
                 committed_position: Callable[[], int], min_position: Callable[[], int],
                 listener: Listener | None, on_fatal: FatalHandler) -> None:
        super().__init__(on_fatal=on_fatal)
        self.dispatcher = dispatcher
        self._config = config
        self._committed_position = committed_position
        self._min_position = min_position
        self.listener = listener
        self.stalled_reason: str | None = None
        self._replayed_s: float | None = None
        self.idle_wait_ms = config.dispatch_interval_ms
        """How long a caught-up pass waits for a wakeup before it looks again."""
        self._doorbell: DoorbellReceiver | None = None

    def wait_on(self, doorbell: DoorbellReceiver, *, idle_wait_ms: int) -> None:
        """Wait on the writer's doorbell instead of an event (before `start`): a ring
        wakes this thread itself, and wakeups from this process ring it too; a caught-up
        pass then polls only every `idle_wait_ms`."""
        assert self._thread is None, "the doorbell is chosen before the thread starts"
        self._doorbell = doorbell
        self.idle_wait_ms = idle_wait_ms

    def wakeup(self) -> None:
        if self._doorbell is not None:
            self._doorbell.wake()
        else:
            super().wakeup()

    def wait_for_running(self, interval_ms: int) -> None:
        if self._doorbell is not None:
            self._doorbell.wait(interval_ms)
        else:
            super().wait_for_running(interval_ms)

    @property
    def behind_bytes(self) -> int:
        return max(0, self._committed_position() - self.dispatcher.dispatched_position)

    def run_once(self) -> None:
        before = self.dispatcher.dispatched_position
        try:
            self.dispatch_once()
            self._replay_stalled_queues()
        except OSError as error:
            if error.errno not in DISK_FULL_ERRNOS:
                raise
            position = self.dispatcher.dispatched_position
            if self.stalled_reason is None:
                log.error("dispatch stalled at %d: %s", position, error)
            self.stalled_reason = f"dispatch stalled at {position}: {error}"
            self.wait_for_running(self._config.dispatch_retry_interval_ms)
            return
        if self.stalled_reason is not None:
            log.info("dispatch resumed at %d", self.dispatcher.dispatched_position)
            self.stalled_reason = None
        if self.dispatcher.dispatched_position == before:
            self.wait_for_running(self.idle_wait_ms)
        elif self.dispatcher.caught_up:  # as reput sleeps 1 ms: a pass per interval under load
            self.wait_for_running(self._config.dispatch_interval_ms)

    def _replay_stalled_queues(self) -> None:
        """Every `stalled_queue_retry_interval_ms` while a queue is stalled (Dispatcher)."""
        if not self.dispatcher.stalled_queues:
            return
        now_s = time.monotonic()
        if self._replayed_s is None:
            self._replayed_s = now_s  # stalled just now: wait a whole interval first
        if (now_s - self._replayed_s) * 1000 < self._config.stalled_queue_retry_interval_ms:
            return
        self._replayed_s = now_s
        notices = self.dispatcher.replay_stalled(min_position=self._min_position())
        if notices and self.listener is not None:
            self.listener(notices)
        if not self.dispatcher.stalled_queues:
            self._replayed_s = None

    def dispatch_once(self) -> None:
        notices = self.dispatcher.dispatch(committed_position=self._committed_position(),
                                           min_position=self._min_position())
        if notices and self.listener is not None:
            self.listener(notices)

    def catch_up(self) -> None:
        """Dispatch until nothing readable is left (run before the thread starts)."""
        while self.behind_bytes > 0:
            self.dispatch_once()

    def shutdown_drain(self) -> None:
        self.catch_up()
