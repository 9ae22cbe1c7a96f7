"""`NoticeHub`: fans the indexer's "queue advanced" notices out to every connected notifier.

Dispatch calls the indexer's listener on its own thread with one batch per pass,
{(topic, queue id): next offset}.  The hub merges batches on the event loop and sends them:

* at low rates immediately: the first batch after a quiet spell of at least
  `notice_batch_latency_ms` goes out at once (a single notice costs one line);
* at high rates in batches: later batches wait until `notice_batch_latency_ms` after the
  previous send, so one line carries every queue that moved in that window and the latency a
  notice adds is bounded by that setting.

Each subscriber has a bounded queue of lines (`notice_subscriber_lines_max`); one that falls
behind is disconnected rather than allowed to grow memory, and on reconnecting it starts from a
fresh snapshot, which is the truth the stream's later lines advance.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping

QueueKey = tuple[str, int]
Snapshot = Callable[[], Iterable[tuple[str, int, int, int]]]
"""(topic, queue id, min offset, max offset) of every consume queue."""


class Subscriber:
    def __init__(self, lines_max: int) -> None:
        self.lines: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=lines_max)
        """The lines to send, in order; None ends the stream."""
        self.dropped = False

    async def take(self, wait_s: float, *, idle_line: bytes) -> tuple[bytes, bool]:
        """Every line waiting, as one chunk, and whether the stream ends after it.  With
        none waiting, waits up to `wait_s` for one, then answers `idle_line` (the
        heartbeat).  One write per wakeup, and no task per line (at a notice per message
        the notifier's side of the stream took ~30% of its time, and a task per line was
        ~40% of that)."""
        lines = self.lines
        if lines.empty():
            try:
                async with asyncio.timeout(wait_s):
                    first = await lines.get()
            except TimeoutError:
                return idle_line, False
        else:
            first = lines.get_nowait()
        taken: list[bytes] = []
        line = first
        while line is not None:
            taken.append(line)
            if lines.empty():
                return b"".join(taken), False
            line = lines.get_nowait()
        return b"".join(taken), True


class NoticeHub:
    def __init__(self, *, batch_latency_ms: int, subscriber_lines_max: int,
                 snapshot: Snapshot) -> None:
        self._latency_s = batch_latency_ms / 1000
        self._lines_max = subscriber_lines_max
        self._snapshot = snapshot
        self._subscribers: set[Subscriber] = set()
        self._pending: dict[QueueKey, int] = {}
        self._last_send_s = 0.0
        self._flush_handle: asyncio.TimerHandle | None = None
        self.lines_sent_total = 0
        self.queues_noticed_total = 0
        self.subscribers_dropped_total = 0

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    # -- producer side (event loop; the dispatch thread goes through `threadsafe`) ----------
    def threadsafe(self, loop: asyncio.AbstractEventLoop
                   ) -> Callable[[Mapping[QueueKey, int]], None]:
        """The listener to give the indexer: hands each batch to the loop."""

        def listener(notices: Mapping[QueueKey, int]) -> None:
            loop.call_soon_threadsafe(self.add, dict(notices))

        return listener

    def add(self, notices: Mapping[QueueKey, int]) -> None:
        for key, next_offset in notices.items():
            if next_offset > self._pending.get(key, -1):
                self._pending[key] = next_offset
        if self._flush_handle is not None:
            return  # a flush is scheduled: it carries these too
        wait_s = self._last_send_s + self._latency_s - time.monotonic()
        if wait_s <= 0:
            self.flush()
        else:
            self._flush_handle = asyncio.get_running_loop().call_later(wait_s, self.flush)

    def flush(self) -> None:
        self._flush_handle = None
        if not self._pending:
            return
        queues = [[topic, queue_id, next_offset]
                  for (topic, queue_id), next_offset in self._pending.items()]
        self.queues_noticed_total += len(queues)
        self._pending = {}
        self._last_send_s = time.monotonic()
        self.broadcast({"type": "advanced", "queues": queues})

    def broadcast(self, document: dict[str, object]) -> None:
        line = json.dumps(document, separators=(",", ":")).encode() + b"\n"
        for subscriber in list(self._subscribers):
            try:
                subscriber.lines.put_nowait(line)
            except asyncio.QueueFull:
                self._drop(subscriber)
        self.lines_sent_total += len(self._subscribers)

    # -- subscriber side -----------------------------------------------------------------
    def subscribe(self) -> Subscriber:
        """A new subscriber whose first line is the snapshot."""
        subscriber = Subscriber(self._lines_max)
        queues = [list(entry) for entry in self._snapshot()]
        # The snapshot reads the live queues, already at or past every pending notice; the
        # lines after it only raise offsets, and a notifier keeps the maximum.
        subscriber.lines.put_nowait(json.dumps({"type": "snapshot", "queues": queues},
                                               separators=(",", ":")).encode() + b"\n")
        self._subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)

    def close(self) -> None:
        """End every stream (shutdown): subscribers see the end and reconnect elsewhere."""
        for subscriber in list(self._subscribers):
            self._drop(subscriber, counted=False)

    def _drop(self, subscriber: Subscriber, *, counted: bool = True) -> None:
        self._subscribers.discard(subscriber)
        subscriber.dropped = True
        if counted:
            self.subscribers_dropped_total += 1
        while not subscriber.lines.empty():
            subscriber.lines.get_nowait()
        subscriber.lines.put_nowait(None)
