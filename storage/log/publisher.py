"""The writer's positions publisher: keeps `positions` (see watermarks.py) current.

While the log moves it republishes every `positions_publish_gap_us`, so a reader in another
process (the indexer) sees new bytes within about that long; when nothing moves it sleeps until
an append wakes it, or `positions_publish_interval_ms` passes (a heartbeat: `published_ms`
tells readers the writer is alive).  A publish that moved the committed position rings the
dispatch doorbell (storage/files/doorbell.py): an indexer process starts its pass at once.
The put path only sets an event that is usually set already: no encode, no CRC, no syscall
per put.

A caller on the put path may publish itself instead (`caller_publishes`, then `publish_now`,
and `ring_unrung` when that says): the writer service does, from its event loop, once per
loop turn that put something.  At one put per millisecond the thread's wakeup was a fifth
of the writer's CPU (the wake, and the interpreter lock handed to the thread and back);
publishing in place costs the publish alone.  The thread still heartbeats and republishes
what moves later (the flush).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..config import StoreConfig
from ..files.doorbell import Doorbell
from ..files.watermarks import PositionsFile
from ..format.volume import POSITIONS_FILE
from ..service_thread import FatalHandler, ServiceThread
from .segment_list import SegmentList

Snapshot = Callable[[], tuple[int, int, int, int]]
"""(min_position, written_position, committed_position, flushed_position)."""


def positions_snapshot(segment_list: SegmentList) -> Snapshot:
    """Read the watermarks lowest first: each later read can only be higher, so the tuple
    is ordered even while the services move them."""

    def snapshot() -> tuple[int, int, int, int]:
        flushed = segment_list.flushed_position
        min_position = min(segment_list.min_position, flushed)
        committed = segment_list.committed_position
        return min_position, segment_list.written_position, committed, flushed

    return snapshot


class PositionsPublisher(ServiceThread):
    name = "positions"

    def __init__(self, directory: Path, config: StoreConfig, *, recovered_end_position: int,
                 snapshot: Snapshot, on_fatal: FatalHandler) -> None:
        super().__init__(on_fatal=on_fatal)
        self._config = config
        self._snapshot = snapshot
        self.file = PositionsFile(directory / POSITIONS_FILE, writable=True)
        previous = self.file.read()
        previous_generation = previous[1]["generation"] if previous is not None else 0
        self.generation = max(previous_generation + 1, time.time_ns())
        """Unique per writer open even if the last publish was lost with the page cache."""
        self.recovered_end_position = recovered_end_position
        self._last: tuple[int, int, int, int] | None = None
        self._last_ms = 0
        self.doorbell = Doorbell(directory)
        """Rung when the committed position moved: an indexer process dispatches at once
        (`_ring`)."""
        self._unrung = False
        """A publish moved the committed position since the last ring."""
        self._rung_ns = 0
        self._lock = threading.Lock()
        """Publishes and rings come from the thread and from `publish_now`'s caller."""
        self.caller_publishes = False
        """Set by a caller around its puts, which then calls `publish_now`: the put path
        does not wake the thread."""
        self.publish()

    def publish_now(self) -> float | None:
        """Publish from the caller's thread after its puts.  Returns None, or the seconds
        after which the caller should `ring_unrung`: the publish moved the committed
        position less than `dispatch_interval_ms` after the last ring, so it is not rung
        yet."""
        with self._lock:
            self._publish()
            if not self._unrung:
                return None
            due_ns = self._rung_ns + self._config.dispatch_interval_ms * 1_000_000
            return max(0, due_ns - time.monotonic_ns()) / 1e9

    def ring_unrung(self) -> None:
        """Ring what a publish left unrung (`publish_now`'s caller, when it said)."""
        with self._lock:
            self._ring(due=True)

    def publish(self) -> bool:
        """Publish now if anything moved or the heartbeat is due; True if it published."""
        with self._lock:
            return self._publish()

    def _publish(self) -> bool:
        values = self._snapshot()
        now_ms = time.time_ns() // 1_000_000
        heartbeat_due = now_ms - self._last_ms >= self._config.positions_publish_interval_ms
        if values == self._last and not heartbeat_due:
            return False
        min_position, written, committed, flushed = values
        assert min_position <= flushed <= committed <= written, values
        self.file.publish(generation=self.generation,
                          recovered_end_position=self.recovered_end_position,
                          min_position=min_position, written_position=written,
                          committed_position=committed, flushed_position=flushed,
                          published_ms=now_ms, writer_pid=os.getpid())
        if self._last is None or committed != self._last[2]:
            self._unrung = True
            self._ring(time.monotonic_ns() - self._rung_ns
                       >= self._config.dispatch_interval_ms * 1_000_000)
        self._last, self._last_ms = values, now_ms
        return True

    def _ring(self, due: bool) -> None:
        """Ring if a publish is unrung and `due`.  While the log moves the doorbell rings at
        most once per `dispatch_interval_ms` (each ring is a system call that wakes the
        indexer, ~5% of the writer's time at one per publish), and once more when it stops
        (`run_once`): every publish is rung within that interval, the first after a quiet
        spell at once."""
        if self._unrung and due:
            assert self._lock.locked()
            self._unrung = False
            self._rung_ns = time.monotonic_ns()
            self.doorbell.ring()

    def run_once(self) -> None:
        if self.publish() and self._snapshot() != self._last:
            time.sleep(self._config.positions_publish_gap_us / 1_000_000)
            return
        with self._lock:
            self._ring(due=True)
        self.wait_for_running(self._config.positions_publish_interval_ms)

    def shutdown_drain(self) -> None:
        with self._lock:
            self._last = None  # a final publish with the drained positions
            self._publish()
        self.file.close()
        self.doorbell.close()
