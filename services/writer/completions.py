"""`LoopCompletions`: acknowledged puts handed to the event loop, one wakeup per group.

Under sync flush the group commit thread acknowledges a whole group of puts after one
fdatasync.  Completing each put's future from that thread through `asyncio.wrap_future`
costs a concurrent future (a condition variable), a chained asyncio future and one
`call_soon_threadsafe` (a self-pipe write) per put.  Here the thread appends (future, value)
to a list and wakes the loop only when the list was empty: a group of 64 puts costs one
wakeup, and the loop completes all 64 in one callback.  Measured in `bench/append.py`
(64 asyncio producers, sync flush): see docs/benchmarks/engine-append.md.
"""

from __future__ import annotations

import asyncio
import threading
from functools import partial
from typing import Any


class LoopCompletions:
    """Completes futures of one event loop from any thread, batching the wakeups."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._ready: list[tuple[asyncio.Future[Any], object]] = []
        self._lock = threading.Lock()

    def future(self) -> tuple[asyncio.Future[Any], partial[None]]:
        """A new future of this loop and the callback that completes it with its argument
        (pass it to `MessageStore.put_callback`)."""
        future: asyncio.Future[Any] = self._loop.create_future()
        return future, partial(self.deliver, future)

    def deliver(self, future: asyncio.Future[Any], value: object) -> None:
        """From any thread (the loop's own included): complete `future` with `value` soon."""
        with self._lock:
            self._ready.append((future, value))
            first = len(self._ready) == 1
        if first:
            self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for future, value in ready:
            if not future.done():  # its request was cancelled (client gone): drop it
                future.set_result(value)
