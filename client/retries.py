"""A consumer's failed messages: nacks, and polling the group's retry topic (without I/O;
shared by `Consumer` and `AsyncConsumer`).

`nack(message)` asks the notifier to store the message again for the group
(`POST /v1/groups/{group}/nacks`, services/notifier/nacks.py): in `%RETRY%<group>`, due
after a delay level (0: 3 + its reconsume times, so 10 s, 30 s, 1 min, ... on the default
table), or in `%DLQ%<group>` once it has been consumed `max_reconsume_times` times.  As
RocketMQ's push consumers do, a consumer polls its group's retry topic beside its own:
`PollRound` first polls the retry topic, without waiting, whenever it is due, then the
topic, its wait cut short for the retry topic's next turn.  The retry topic is due every
`retry_poll_interval_ms` (another member's nacks come due there too) and as soon as a nack
this consumer made is due, and again every 100 ms until its copy comes (2 s at most), so its
own retries come on time while an idle consumer makes one more request per interval.
Commit after handling both: the nacked message's offset commits as any other (its copy is
what comes again).
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from mqstore.client.consumer_calls import ConsumerState, ReceivedMessage, Request
from mqstore.client.errors import ServerError

RETRY_PREFIX = "%RETRY%"
DEFAULT_RETRY_POLL_INTERVAL_MS = 5_000
"""The default wait of a poll: an idle consumer polls its retry topic once per long poll."""
NACK_RECHECK_MS = 100
NACK_LATE_MS_MAX = 2_000
"""How long after its due time a consumer looks for its own nack's copy every
`NACK_RECHECK_MS` (then only every retry_poll_interval_ms): the delay schedule's pass
(writer.delay_pass_interval_ms, 100 ms) and the dispatch put it there a little late."""


@dataclasses.dataclass(frozen=True)
class NackResult:
    """Where a nacked message's copy went."""

    stored_in: str
    """`%RETRY%<group>`, or `%DLQ%<group>` for a dead letter."""
    dead_letter: bool
    reconsume_times: int
    """The copy's: how many times the message will have been consumed when it comes again."""
    delay_level: int
    delay_ms: int
    """How long the copy waits (0 for a dead letter)."""


class RetryPolling:
    """When the group's retry topic is next due, and the state its polls keep."""

    def __init__(self, prefix: str, group: str, *, poll_interval_ms: int,
                 clock_s: Callable[[], float] = time.monotonic) -> None:
        if poll_interval_ms < 1:
            raise ValueError(f"retry_poll_interval_ms must be >= 1, not {poll_interval_ms}")
        self.state = ConsumerState(prefix, group, RETRY_PREFIX + group, tags=None)
        self._interval_s = poll_interval_ms / 1000
        self._clock_s = clock_s
        self._next_poll_s = clock_s()  # the first poll looks at once
        self._nacks_due_s: list[tuple[float, float]] = []
        """Each copy this consumer nacked and has not yet seen: when to look for it next,
        and when to stop looking (monotonic seconds), soonest first."""

    def due_in_ms(self) -> int:
        """Milliseconds until the retry topic is due (0: now)."""
        due_s = self._next_poll_s
        if self._nacks_due_s:
            due_s = min(due_s, self._nacks_due_s[0][0])
        return max(0, int((due_s - self._clock_s()) * 1000 + 0.999))

    def polled(self, found: int) -> None:
        """The retry topic was polled and gave `found` messages: each satisfies one of this
        consumer's nacks that were due, soonest first; one still missing (the schedule and
        dispatch put it in the topic a little after its due time) is looked for again every
        `NACK_RECHECK_MS` until `NACK_LATE_MS_MAX` past its due time."""
        now_s = self._clock_s()
        self._next_poll_s = now_s + self._interval_s
        due: list[tuple[float, float]] = []
        while self._nacks_due_s and self._nacks_due_s[0][0] <= now_s:
            due.append(heapq.heappop(self._nacks_due_s))
        for _, give_up_s in due[found:]:
            if now_s < give_up_s:
                heapq.heappush(self._nacks_due_s, (now_s + NACK_RECHECK_MS / 1000, give_up_s))

    def nack_request(self, message: ReceivedMessage, *, delay_level: int,
                     max_reconsume_times: int | None) -> Request:
        document: dict[str, object] = {"topic": message.topic, "queue_id": message.queue_id,
                                       "queue_offset": message.queue_offset,
                                       "delay_level": delay_level}
        if max_reconsume_times is not None:
            document["max_reconsume_times"] = max_reconsume_times
        return Request("POST", f"{self.state.group_path}/nacks", json.dumps(document).encode())

    def nacked(self, request: Request, document: Mapping[str, Any]) -> NackResult:
        try:
            result = NackResult(str(document["stored_in"]), bool(document["dead_letter"]),
                                int(document["reconsume_times"]), int(document["delay_level"]),
                                int(document["delay_ms"]))
        except (KeyError, TypeError, ValueError) as error:
            raise ServerError(f"unreadable answer to {request.path}: {error!r}") from None
        if not result.dead_letter:
            due_s = self._clock_s() + result.delay_ms / 1000
            heapq.heappush(self._nacks_due_s, (due_s, due_s + NACK_LATE_MS_MAX / 1000))
        return result


class PollRound:
    """One `poll` call: the requests to make, in order, and when to stop.

        round = PollRound(state, retries, max_messages=32, wait_ms=5000)
        while (step := round.next()) is not None:
            messages = round.answered(step, call(step.request, wait_ms=step.wait_ms))
            if messages: return messages
        return []
    """

    @dataclasses.dataclass(frozen=True)
    class Step:
        state: ConsumerState
        request: Request
        wait_ms: int
        retry: bool
        """A poll of the retry topic (never waits)."""
        last: bool = False
        """The caller's time is spent, or this wait runs to its end: nothing more after an
        empty answer."""

    def __init__(self, state: ConsumerState, retries: RetryPolling | None, *,
                 max_messages: int, wait_ms: int,
                 clock_s: Callable[[], float] = time.monotonic) -> None:
        self._state = state
        self._retries = retries
        self._max_messages = max_messages
        self._wait_ms = wait_ms
        self._clock_s = clock_s
        self._deadline_s = clock_s() + wait_ms / 1000
        self._first = True
        self._done = False

    def next(self) -> PollRound.Step | None:
        """The next request, or None: the poll found nothing in its time."""
        if self._done:
            return None
        retries = self._retries
        if retries is not None and retries.due_in_ms() == 0:
            return self.Step(retries.state, retries.state.poll_request(
                max_messages=self._max_messages, wait_ms=0), 0, retry=True)
        # The first request asks for exactly what the caller did (no rounding).
        remaining_ms = self._wait_ms if self._first else \
            max(0, int((self._deadline_s - self._clock_s()) * 1000))
        self._first = False
        wait_ms = remaining_ms if retries is None else min(remaining_ms, retries.due_in_ms())
        return self.Step(self._state, self._state.poll_request(
            max_messages=self._max_messages, wait_ms=wait_ms), wait_ms, retry=False,
            last=wait_ms == remaining_ms)

    def answered(self, step: PollRound.Step, document: Mapping[str, Any]
                 ) -> list[ReceivedMessage]:
        """The step's messages; after an empty one, `next` says whether to go on: past an
        empty wait that ran to the caller's end, or once no time is left, it does not
        (a tag filter that skipped entries moves the positions: then it asks again while
        time remains)."""
        before = dict(step.state.positions)
        messages = step.state.take(step.request, document)
        if step.retry:
            assert self._retries is not None
            self._retries.polled(len(messages))
        elif not messages and step.last and (step.wait_ms == 0 or
                                             step.state.positions == before):
            self._done = True
        return messages
