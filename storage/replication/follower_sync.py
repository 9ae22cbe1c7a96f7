"""Sync replication on the master: followers' confirmed positions and the producers waiting.

RocketMQ keeps `push2SlaveMaxOffset` (the highest position any slave confirmed) and a
`GroupTransferService` whose requests complete once it covers their end or time out.  Here:

* `FollowerPositions`: each connected follower's confirmed position (the replication server
  reports connects, confirmations and disconnects); `replicated_position` is the highest
  position any follower ever confirmed, and only grows.
* `GroupTransferService`: requests `(end position, deadline, completion)`.  A confirmation
  completes every request it covers at once, on the confirming thread (no hand-off); the
  service's own thread only expires requests at their deadline, sleeping until the next one.
* `FollowerAcknowledger`: what a sync-master put does after its append:
  SLAVE_NOT_AVAILABLE at once when no connected follower is within
  `replication_lag_bytes_max` of its end; otherwise wait, and SLAVE_NOT_AVAILABLE as
  soon as the last follower disconnects (a follower stopping for a roll), not
  FLUSH_SLAVE_TIMEOUT at the deadline: RocketMQ waits the deadline out, and its client,
  whose send times out at the same 3 s, fails the send. With the pool on, the sender
  commits on demand before it reads (replication.py), so a waiting put is readable at
  once, not after the commit service's 16 KiB or 200 ms (RocketMQ issue #1372), with one
  commit for all the puts since.

A follower's confirmation means its process holds the bytes (appended to its mapped segments,
synced by its own flush policy), as a RocketMQ slave's reported offset does.
"""

from __future__ import annotations

import _thread
import collections
import dataclasses
import heapq
import threading
import time
from collections.abc import Callable

from ..config import StoreConfig
from ..format.message import PutResult, PutStatus
from ..log.acknowledge import Outcome
from ..service_thread import FatalHandler, ServiceThread

Completion = Callable[[bool], None]
"""True once a follower confirmed the request's end; False at its deadline or on stop."""
IDLE_WAIT_MS = 1000
"""How long the transfer service sleeps with no request (a submit wakes it)."""


@dataclasses.dataclass
class FollowerProgress:
    """One connected follower, as the master sees it."""

    name: str
    """The connection's peer address, "host:port"."""
    connected_at_ms: int
    confirmed_position: int
    """The end of the follower's log, as it last reported it."""
    confirmed_at_ms: int


class FollowerPositions:
    """Thread-safe; `on_replicated(position)` runs on the confirming thread when the highest
    confirmed position grows."""

    def __init__(self, *, on_replicated: Callable[[int], None],
                 on_no_follower: Callable[[], None] = lambda: None) -> None:
        """`on_no_follower` runs on the disconnecting thread when the last connected follower
        goes: nothing is left to confirm what waits."""
        self._on_replicated = on_replicated
        self._on_no_follower = on_no_follower
        self._followers: dict[str, FollowerProgress] = {}
        self._lock = threading.Lock()
        self.replicated_position = 0
        """RocketMQ `push2SlaveMaxOffset`: the highest position any follower confirmed."""

    def connect(self, name: str, position: int) -> None:
        now_ms = _now_ms()
        with self._lock:
            assert name not in self._followers, f"{name} connected twice"
            self._followers[name] = FollowerProgress(name, now_ms, position, now_ms)
        self.confirm(name, position)

    def confirm(self, name: str, position: int) -> None:
        with self._lock:
            follower = self._followers.get(name)
            if follower is not None:
                follower.confirmed_position = max(follower.confirmed_position, position)
                follower.confirmed_at_ms = _now_ms()
            grown = position > self.replicated_position
            if grown:
                self.replicated_position = position
        if grown:
            self._on_replicated(position)

    def disconnect(self, name: str) -> None:
        with self._lock:
            gone = self._followers.pop(name, None) is not None
            alone = not self._followers
        if gone and alone:
            self._on_no_follower()

    def followers(self) -> list[FollowerProgress]:
        """Copies, in connection order."""
        with self._lock:
            return [dataclasses.replace(follower) for follower in self._followers.values()]

    def within_lag(self, end_position: int, *, lag_bytes_max: int) -> bool:
        """RocketMQ `isSlaveOK`: some connected follower is less than `lag_bytes_max` behind."""
        return self.count_within_lag(end_position, lag_bytes_max=lag_bytes_max) > 0

    def count_within_lag(self, end_position: int, *, lag_bytes_max: int) -> int:
        """How many connected followers are less than `lag_bytes_max` behind `end_position`:
        those a sync put could wait for."""
        with self._lock:
            return sum(end_position - follower.confirmed_position < lag_bytes_max
                       for follower in self._followers.values())


class _Request:
    __slots__ = ("deadline_s", "done", "end", "on_done")

    def __init__(self, end: int, deadline_s: float, on_done: Completion) -> None:
        self.end = end
        self.deadline_s = deadline_s
        self.on_done = on_done
        self.done = False

    def __lt__(self, other: _Request) -> bool:
        return self.end < other.end


class GroupTransferService(ServiceThread):
    name = "group-transfer"

    def __init__(self, *, on_fatal: FatalHandler) -> None:
        super().__init__(on_fatal=on_fatal)
        self._by_end: list[_Request] = []
        """A heap: confirmations complete from the smallest end."""
        self._by_deadline: collections.deque[_Request] = collections.deque()
        """Submission order, which is deadline order: every request has the same timeout."""
        self._lock = threading.Lock()
        self._replicated = 0
        self._closed = False

    @property
    def pending_count(self) -> int:
        with self._lock:
            return sum(1 for request in self._by_deadline if not request.done)

    def submit(self, end_position: int, *, timeout_s: float, on_done: Completion) -> bool:
        """Register `on_done`; False (never called) if the service is stopping or failed."""
        first = False
        with self._lock:
            if self._closed or self.stopping:
                return False
            if end_position <= self._replicated:
                covered = True
            else:
                covered = False
                request = _Request(end_position, time.monotonic() + timeout_s, on_done)
                heapq.heappush(self._by_end, request)
                self._by_deadline.append(request)
                first = len(self._by_deadline) == 1
        if covered:
            on_done(True)
        elif first:
            self.wakeup()  # it may be sleeping the idle wait, longer than this deadline
        return True

    def replicated(self, position: int) -> None:
        """A follower confirmed `position`: complete every request it covers, here."""
        completed = []
        with self._lock:
            self._replicated = max(self._replicated, position)
            heap = self._by_end
            while heap and heap[0].end <= position:
                request = heapq.heappop(heap)
                if not request.done:
                    request.done = True
                    completed.append(request)
            deadlines = self._by_deadline
            while deadlines and deadlines[0].done:
                deadlines.popleft()
        for request in completed:
            request.on_done(True)

    def run_once(self) -> None:
        expired = []
        now_s = time.monotonic()
        with self._lock:
            deadlines = self._by_deadline
            while deadlines and (deadlines[0].done or deadlines[0].deadline_s <= now_s):
                request = deadlines.popleft()
                if not request.done:
                    request.done = True
                    expired.append(request)
            next_s = deadlines[0].deadline_s if deadlines else None
        for request in expired:
            request.on_done(False)
        wait_ms = IDLE_WAIT_MS if next_s is None else (next_s - now_s) * 1000
        self.wait_for_running(max(1, min(IDLE_WAIT_MS, int(wait_ms) + 1)))

    def fail_all(self) -> None:
        """Complete every pending request as not replicated (the store stopped)."""
        self._complete_pending(close=True)

    def expire_all(self) -> None:
        """Complete every pending request as not replicated now, before its deadline: no
        follower is left to confirm it (the last one disconnected).  A producer's client
        times out at about the same 3 s as the deadline, so waiting it out would turn a
        stored message into a failed send."""
        self._complete_pending(close=False)

    def _complete_pending(self, *, close: bool) -> None:
        with self._lock:
            self._closed = self._closed or close
            pending = [request for request in self._by_deadline if not request.done]
            for request in pending:
                request.done = True
            self._by_deadline.clear()
            self._by_end.clear()
        for request in pending:
            request.on_done(False)

    def shutdown_drain(self) -> None:
        self.fail_all()


class FollowerAcknowledger:
    """The replication half of a sync-master put's acknowledgement (acknowledge.py joins it
    with the flush half)."""

    def __init__(self, transfer: GroupTransferService, progress: FollowerPositions,
                 config: StoreConfig) -> None:
        self._transfer = transfer
        self._progress = progress
        self._config = config
        self._timeout_s = config.replication_sync_timeout_ms / 1000
        self.observe_latency: Callable[[float], None] | None = None
        """Called with the seconds from append to a follower's confirmation (metrics)."""

    def submit(self, results: list[PutResult], on_done: Callable[[Outcome], None]) -> None:
        """Call `on_done` once the results' bytes are confirmed, at their deadline, or at once
        (SLAVE_NOT_AVAILABLE) when no follower is close enough to confirm them."""
        last = results[-1]
        end = last.physical_offset + last.size_bytes
        lag_max = self._config.replication_lag_bytes_max
        if not self._progress.within_lag(end, lag_bytes_max=lag_max):
            on_done((PutStatus.SLAVE_NOT_AVAILABLE,
                     f"no follower connected within {lag_max} bytes of position {end} "
                     f"(replication_lag_bytes_max)"))
            return
        started_s = time.monotonic()

        def completed(replicated: bool) -> None:
            if not replicated and not self._progress.within_lag(end, lag_bytes_max=lag_max):
                on_done((PutStatus.SLAVE_NOT_AVAILABLE,
                         f"the followers disconnected before confirming position {end}"))
                return
            if not replicated:
                on_done((PutStatus.FLUSH_SLAVE_TIMEOUT,
                         f"no follower confirmed position {end} within "
                         f"{self._config.replication_sync_timeout_ms} ms "
                         f"(replication_sync_timeout_ms)"))
                return
            if self.observe_latency is not None:
                self.observe_latency(time.monotonic() - started_s)
            on_done(None)

        if not self._transfer.submit(end, timeout_s=self._timeout_s, on_done=completed):
            completed(False)
        elif not self._progress.within_lag(end, lag_bytes_max=lag_max):
            self._transfer.expire_all()  # the last follower left between the check and here

    def wait(self, results: list[PutResult]) -> Outcome:
        """`submit`, blocking until the outcome."""
        parked = _thread.allocate_lock()
        parked.acquire()
        outcomes: list[Outcome] = []

        def done(outcome: Outcome) -> None:
            outcomes.append(outcome)
            parked.release()

        self.submit(results, done)
        # The transfer service completes every request by its deadline; the margin only
        # guards against a service that died without failing its requests.
        if not parked.acquire(timeout=self._timeout_s + 5):
            return (PutStatus.FLUSH_SLAVE_TIMEOUT, "the replication service did not answer")
        return outcomes[0]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
