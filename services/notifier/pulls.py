"""Pulls with long polling: by queue offset, and a consumer group's poll across a topic.

A pull runs the view's get; if that found nothing because the reader is caught up
(NO_MESSAGE_IN_QUEUE, OFFSET_OVERFLOW_ONE) and the pull may wait, it is held (held.py) and
runs the get again when a notice, the refresh pass, the end of its wait or shutdown wakes it.
Any other empty answer returns at once with its next offset, as RocketMQ's broker does:
NO_MATCHED_MESSAGE (the tag filter skipped entries: retry from next_offset),
OFFSET_TOO_SMALL / OFFSET_OVERFLOW_BADLY (moved: continue from next_offset),
OFFSET_FOUND_NULL and MESSAGE_WAS_REMOVING (retention took them).

A group poll reads every queue of the topic from the caller's positions (or the group's
committed offsets, or the queue's min offset for a group that never committed): queues are
taken round robin, each first up to its share (ceil(max_messages / queues), at least
`group_poll_queue_share_min`), then the budget left goes to queues that had more.  The next
poll of the topic starts after the last queue this one read, so every queue with data is
reached within queues × share / max_messages polls.  It is held only while every queue is
caught up, watching them all and the topic for new queues.

Several replicas behind one load balancer see new data a few milliseconds apart.  A poll
that reaches a replica which has not yet seen up to the caller's position answers
OFFSET_OVERFLOW_BADLY for that queue and moves the position back to that replica's end, as
RocketMQ moves an offset past a queue's end: the caller may then see a few messages again
(at least once), never miss one.  Committed offsets are unaffected (commits keep the maximum).
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from mqstore.services.notifier.answers import message_json, pull_json, suggest_follower
from mqstore.services.notifier.held import SHUTDOWN, HeldPulls
from mqstore.services.notifier.metrics import NotifierMetrics
from mqstore.storage import GetResult, GetStatus
from mqstore.storage.reads.get import PropertyFilter
from mqstore.storage.reads.store_view import StoreView

HOLD_STATUSES = frozenset({GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.OFFSET_OVERFLOW_ONE})
"""A reader that is caught up: only new data can change the answer (RocketMQ PULL_NOT_FOUND
without OFFSET_FOUND_NULL, which a deleted file causes and no new data cures)."""
T = TypeVar("T")


async def long_poll(view: StoreView, held: HeldPulls, topic: str, queue_id: int, offset: int,
                    max_messages: int, *, tags: Sequence[str] | None, records_only: bool,
                    wait_ms: int, client: str, answer: Callable[[GetResult], T],
                    on_hold: Callable[[], None], on_woken: Callable[[str], None],
                    property_filter: PropertyFilter | None = None) -> T:
    """The one long-poll loop of a queue, for the HTTP API and the remoting front: get; if
    caught up and the wait is not over, hold (`on_hold`) until a notice, the refresh pass,
    the wait's end or shutdown wakes it (`on_woken(cause)`: the wake-up metrics), and get
    again.  `answer` shapes the result while its records are still held.  `tags` and
    `property_filter` (a SQL92 filter) select what the get serves.  Raises
    HeldPullsFullError / HeldPullsClientFullError when no slot is free (each protocol
    answers its own way)."""
    loop = asyncio.get_running_loop()
    deadline_s = loop.time() + wait_ms / 1000
    while True:
        with view.get(topic, queue_id, offset, max_messages, tags=tags,
                      records_only=records_only, property_filter=property_filter) as result:
            remaining_s = deadline_s - loop.time()
            if (result.records or result.messages or result.status not in HOLD_STATUSES
                    or remaining_s <= 0):
                return answer(result)
        on_hold()
        cause = await held.wait(topic, {queue_id: offset}, any_queue=False,
                                timeout_s=remaining_s, client=client)
        on_woken(cause)
        if cause == SHUTDOWN:
            deadline_s = loop.time()  # one more get, then answer


class Puller:
    def __init__(self, view: StoreView, held: HeldPulls, metrics: NotifierMetrics, *,
                 behind_bytes_max: int, queue_share_min: int) -> None:
        assert queue_share_min > 0
        self._view = view
        self._held = held
        self._metrics = metrics
        self._queue_share_min = queue_share_min
        self._next_queue: dict[str, int] = {}
        """Per topic, the queue id the next group poll starts at (one entry per topic the
        store holds: bounded by the topics on the volume)."""
        self._behind_bytes_max = behind_bytes_max
        """Past this far behind the log's end, answers suggest pulling from a follower."""

    async def pull_queue(self, topic: str, queue_id: int, offset: int, *, max_messages: int,
                         tags: Sequence[str] | None, wait_ms: int, client: str,
                         on_hold: Callable[[], None]) -> dict[str, Any]:
        """One queue from `offset`; held up to `wait_ms` while caught up (`on_hold` is
        called each time it waits: the metrics tell waiting pulls apart).  `client`: whose
        held-pull share it takes (its remote address)."""
        return await long_poll(
            self._view, self._held, topic, queue_id, offset, max_messages, tags=tags,
            records_only=False, wait_ms=wait_ms, client=client, on_hold=on_hold,
            on_woken=self._metrics.woken,
            answer=lambda result: pull_json(
                result, committed_position=self._view.log.committed_position,
                behind_bytes_max=self._behind_bytes_max))

    async def poll_group(self, topic: str, *, start_offset: Callable[[int], int],
                         max_messages: int, tags: Sequence[str] | None, wait_ms: int,
                         client: str, on_hold: Callable[[], None]) -> dict[str, Any]:
        """Messages across the topic's queues from `start_offset(queue_id)`; held up to
        `wait_ms` while every queue is caught up.  Answers the messages (each with its
        queue id and offset) and every queue's next offset."""
        loop = asyncio.get_running_loop()
        deadline_s = loop.time() + wait_ms / 1000
        positions: dict[int, int] = {}
        while True:
            for queue_id in self._view.queue_ids(topic):
                if queue_id not in positions:
                    positions[queue_id] = start_offset(queue_id)
            damaged: list[dict[str, Any]] = []
            messages, caught_up = self._collect(topic, positions, max_messages, tags, damaged)
            remaining_s = deadline_s - loop.time()
            if messages or damaged or not caught_up or remaining_s <= 0:
                newest = max((m["physical_offset"] for m in messages), default=None)
                answer = {"messages": messages,
                          "next_offsets": {str(queue_id): offset
                                           for queue_id, offset in sorted(positions.items())},
                          "suggest_pull_from_follower": suggest_follower(
                              newest, committed_position=self._view.log.committed_position,
                              behind_bytes_max=self._behind_bytes_max)}
                if damaged:
                    answer["damaged"] = damaged
                return answer
            on_hold()
            cause = await self._held.wait(topic, dict(positions), any_queue=True,
                                          timeout_s=remaining_s, client=client)
            self._metrics.woken(cause)
            if cause == SHUTDOWN:
                deadline_s = loop.time()

    def _collect(self, topic: str, positions: dict[int, int], max_messages: int,
                 tags: Sequence[str] | None,
                 damaged: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
        """Round robin over the queues, moving `positions` on; returns the messages and
        whether every queue is caught up (only new data can change the answer).  Damaged
        offsets it moved past are added to `damaged` (the answer names them)."""
        queue_ids = sorted(positions)
        if not queue_ids:
            return [], True
        first = bisect.bisect_left(queue_ids, self._next_queue.get(topic, 0))
        order = queue_ids[first:] + queue_ids[:first]
        share = max(-(-max_messages // len(order)), self._queue_share_min)
        messages: list[dict[str, Any]] = []
        caught_up = True
        more: list[int] = []
        for queue_id in order:
            budget = min(share, max_messages - len(messages))
            if budget <= 0:
                caught_up = False  # not read this time: it may have data
                self._next_queue[topic] = queue_id
                break
            found, status, has_more = self._read(topic, queue_id, positions, budget, tags,
                                                 damaged)
            messages += found
            caught_up &= status in HOLD_STATUSES
            if has_more:
                more.append(queue_id)
        else:
            self._next_queue[topic] = order[0] + 1  # all read: start one later next time
        for queue_id in more:
            budget = max_messages - len(messages)
            if budget <= 0:
                break
            messages += self._read(topic, queue_id, positions, budget, tags, damaged)[0]
        return messages, caught_up

    def _read(self, topic: str, queue_id: int, positions: dict[int, int], budget: int,
              tags: Sequence[str] | None, damaged: list[dict[str, Any]]
              ) -> tuple[list[dict[str, Any]], GetStatus, bool]:
        """(messages, status, whether the queue holds more) from the queue's position,
        which moves on."""
        with self._view.get(topic, queue_id, positions[queue_id], budget,
                            tags=tags) as result:
            if result.status is GetStatus.MESSAGE_CORRUPT:
                damaged.append({"queue_id": queue_id, "offset": result.next_offset - 1,
                                "reason": result.reason})
            positions[queue_id] = result.next_offset
            has_more = (result.status is GetStatus.FOUND
                        and result.next_offset < result.max_offset)
            return ([message_json(message) for message in result.messages], result.status,
                    has_more)


def committed_or_min(view: StoreView, topic: str, *, given: Mapping[int, int],
                     committed: Mapping[int, int]) -> Callable[[int], int]:
    """Where a group poll starts on each queue: the caller's position, else the group's
    committed offset, else the queue's min offset (a group that never committed starts at
    the oldest message retained)."""

    def start_offset(queue_id: int) -> int:
        if queue_id in given:
            return given[queue_id]
        if queue_id in committed:
            return committed[queue_id]
        return view.min_offset(topic, queue_id)

    return start_offset
