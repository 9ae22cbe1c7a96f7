"""`HeldPulls`: pulls held until their queue moves past them, or their wait ends (long polling).

RocketMQ's `PullRequestHoldService` parks a pull that found nothing in a table keyed by
topic@queue and re-runs it when the queue's max offset passes the pull's offset.  Here a held
pull is an `asyncio.Future` registered under each queue it watches:

* a single-queue pull watches (topic, queue id) from its offset;
* a group poll watches every queue of the topic it knows from its position, and the topic
  itself for queues that appear while it waits (from offset 0).

`notify(advanced, cause)` settles the futures of the pulls a batch of advances concerns, and
the woken handler runs its get again.  The wait ends with its cause: "notice" (the indexer's
stream), "refresh" (the view's own pass found new data), "timeout", or "shutdown".
Everything runs on the event loop thread; between a handler's empty get and its `wait` there
is no `await`, so no advance can slip in between.  At most `held_max` pulls wait at once,
and at most `held_per_client_max` of one client (its remote address): one client cannot take
every slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Mapping
from typing import TypeVar

QueueKey = tuple[str, int]

NOTICE = "notice"
REFRESH = "refresh"
TIMEOUT = "timeout"
SHUTDOWN = "shutdown"
CAUSES = (NOTICE, REFRESH, TIMEOUT, SHUTDOWN)
Key = TypeVar("Key", bound=Hashable)


class HeldPullsFullError(Exception):
    """`held_max` pulls are waiting already."""


class HeldPullsClientFullError(HeldPullsFullError):
    """`held_per_client_max` pulls of this client are waiting already."""


class _Held:
    __slots__ = ("client", "future", "topic", "watched")

    def __init__(self, future: asyncio.Future[str], topic: str,
                 watched: Mapping[int, int], client: str) -> None:
        self.future = future
        self.topic = topic
        self.client = client
        self.watched = watched
        """Queue id → the offset this pull waits to see passed."""


class HeldPulls:
    def __init__(self, *, held_max: int, held_per_client_max: int) -> None:
        assert held_max > 0 and held_per_client_max > 0
        self.held_max = held_max
        self.held_per_client_max = min(held_per_client_max, held_max)
        self._by_client: dict[str, int] = {}
        """Client → its pulls held (no entry at zero)."""
        self._by_queue: dict[QueueKey, set[_Held]] = {}
        self._by_topic: dict[str, set[_Held]] = {}
        self._count = 0
        self._closed = False

    @property
    def held_count(self) -> int:
        return self._count

    async def wait(self, topic: str, watched: Mapping[int, int], *, any_queue: bool,
                   timeout_s: float, client: str) -> str:
        """Wait until a watched queue moves past its offset (with `any_queue`, also until a
        queue of `topic` not in `watched` gets its first message), or `timeout_s` passes.
        Returns the cause; raises `HeldPullsFullError` if `held_max` pulls wait already,
        `HeldPullsClientFullError` if `held_per_client_max` of `client`'s do."""
        if self._closed:
            return SHUTDOWN  # shutting down: answer with what there is, hold nothing
        if self._count >= self.held_max:
            raise HeldPullsFullError(f"{self._count} pulls are held already "
                                     f"(held_requests_max={self.held_max})")
        held_by_client = self._by_client.get(client, 0)
        if held_by_client >= self.held_per_client_max:
            raise HeldPullsClientFullError(
                f"this client ({client}) has {held_by_client} pulls held already "
                f"(held_requests_per_client_max={self.held_per_client_max})")
        loop = asyncio.get_running_loop()
        held = _Held(loop.create_future(), topic, watched, client)
        self._register(held, any_queue=any_queue)
        timer = loop.call_later(max(0.0, timeout_s), _settle, held.future, TIMEOUT)
        try:
            return await held.future
        finally:
            timer.cancel()
            self._unregister(held, any_queue=any_queue)

    def notify(self, advanced: Mapping[QueueKey, int], cause: str) -> int:
        """Queues moved to these next (max) offsets: wake the pulls they concern.  Returns
        how many were woken."""
        woken = 0
        for (topic, queue_id), next_offset in advanced.items():
            for held in self._by_queue.get((topic, queue_id), ()):
                if next_offset > held.watched[queue_id]:
                    woken += _settle(held.future, cause)
            for held in self._by_topic.get(topic, ()):
                if queue_id not in held.watched and next_offset > 0:
                    woken += _settle(held.future, cause)
        return woken

    def close(self) -> int:
        """Shutdown: answer every held pull now, and hold no new one."""
        self._closed = True
        return self.wake_all(SHUTDOWN)

    def wake_all(self, cause: str) -> int:
        """Answer every held pull now (they reply with what they have)."""
        woken = 0
        for group in (*self._by_queue.values(), *self._by_topic.values()):
            for held in group:
                woken += _settle(held.future, cause)
        return woken

    def _register(self, held: _Held, *, any_queue: bool) -> None:
        for queue_id in held.watched:
            self._by_queue.setdefault((held.topic, queue_id), set()).add(held)
        if any_queue:
            self._by_topic.setdefault(held.topic, set()).add(held)
        self._count += 1
        self._by_client[held.client] = self._by_client.get(held.client, 0) + 1

    def _unregister(self, held: _Held, *, any_queue: bool) -> None:
        for queue_id in held.watched:
            _discard(self._by_queue, (held.topic, queue_id), held)
        if any_queue:
            _discard(self._by_topic, held.topic, held)
        self._count -= 1
        assert self._count >= 0
        left = self._by_client.pop(held.client) - 1
        if left:
            self._by_client[held.client] = left


def _settle(future: asyncio.Future[str], cause: str) -> int:
    if future.done():
        return 0
    future.set_result(cause)
    return 1


def _discard(table: dict[Key, set[_Held]], key: Key, held: _Held) -> None:
    group = table.get(key)
    if group is not None:
        group.discard(held)
        if not group:
            del table[key]
