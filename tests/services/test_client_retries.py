"""The Python client's retry polling, without I/O (client/retries.py): which requests a poll
makes, with which waits, on a clock the test moves."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mqstore.client.consumer_calls import ConsumerState, ReceivedMessage
from mqstore.client.retries import NACK_LATE_MS_MAX, NACK_RECHECK_MS, PollRound, RetryPolling


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def _answer(topic: str, *offsets: int) -> dict[str, Any]:
    return {"messages": [{
        "topic": topic, "queue_id": 0, "queue_offset": offset, "physical_offset": 0,
        "msg_id": "00", "store_timestamp_ms": 1, "born_timestamp_ms": 1, "tags": None,
        "keys": [], "properties": {}, "body_base64": ""} for offset in offsets],
        "next_offsets": {"0": offsets[-1] + 1} if offsets else {}}


def _plan(clock: Clock, retries: RetryPolling | None, wait_ms: int,
          answers: dict[str, list[dict[str, Any]]], *, spend_waits: bool = True
          ) -> list[tuple[str, int]]:
    """The (topic, wait) of each request one poll makes, answering each topic's requests
    from `answers` in order (then empty), the clock moved by each wait."""
    state = ConsumerState("", "g", "T", tags=None)
    poll = PollRound(state, retries, max_messages=8, wait_ms=wait_ms, clock_s=clock)
    asked: list[tuple[str, int]] = []
    while (step := poll.next()) is not None:
        topic = step.state.topic
        asked.append((topic, json.loads(step.request.body or b"{}")["wait_ms"]))
        queue = answers.get(topic, [])
        answer = queue.pop(0) if queue else _answer(topic)
        if spend_waits and not answer["messages"]:
            clock.now_s += step.wait_ms / 1000
        if poll.answered(step, answer):
            break
    return asked


def test_without_retries_one_poll_asks_for_the_whole_wait() -> None:
    assert _plan(Clock(), None, 30_000, {}) == [("T", 30_000)]


def test_the_retry_topic_is_looked_at_first_then_every_interval() -> None:
    clock = Clock()
    retries = RetryPolling("", "g", poll_interval_ms=5_000, clock_s=clock)
    assert _plan(clock, retries, 12_000, {}) == [
        ("%RETRY%g", 0), ("T", 5_000), ("%RETRY%g", 0), ("T", 5_000), ("%RETRY%g", 0),
        ("T", 2_000)]


def test_retry_messages_are_returned_before_the_topic_is_polled() -> None:
    clock = Clock()
    retries = RetryPolling("", "g", poll_interval_ms=5_000, clock_s=clock)
    assert _plan(clock, retries, 5_000, {"%RETRY%g": [_answer("%RETRY%g", 0)]}) == [
        ("%RETRY%g", 0)]


def _nacked(retries: RetryPolling, delay_ms: int) -> None:
    message = ReceivedMessage("T", 0, 0, 0, "00", 1, 1, None, (), {}, b"")
    request = retries.nack_request(message, delay_level=0, max_reconsume_times=None)
    assert json.loads(request.body or b"") == {"topic": "T", "queue_id": 0, "queue_offset": 0,
                                               "delay_level": 0}
    retries.nacked(request, {"stored_in": "%RETRY%g", "dead_letter": False,
                             "reconsume_times": 1, "delay_level": 3, "delay_ms": delay_ms})


def test_an_own_nack_cuts_the_wait_to_its_due_time_then_is_looked_for_until_late() -> None:
    clock = Clock()
    retries = RetryPolling("", "g", poll_interval_ms=60_000, clock_s=clock)
    _plan(clock, retries, 0, {})  # the first look at the retry topic
    _nacked(retries, 3_000)
    asked = _plan(clock, retries, 10_000, {})
    assert asked[:3] == [("T", 3_000), ("%RETRY%g", 0), ("T", NACK_RECHECK_MS)]
    rechecks = asked.count(("T", NACK_RECHECK_MS))
    assert rechecks == NACK_LATE_MS_MAX // NACK_RECHECK_MS
    topic, last_wait_ms = asked[-1]  # the rest of the caller's wait (to a float's rounding)
    assert topic == "T"
    assert abs(last_wait_ms - (10_000 - 3_000 - NACK_LATE_MS_MAX)) <= 1


def test_an_own_nack_found_stops_the_rechecks() -> None:
    clock = Clock()
    retries = RetryPolling("", "g", poll_interval_ms=60_000, clock_s=clock)
    _plan(clock, retries, 0, {})
    _nacked(retries, 3_000)
    assert _plan(clock, retries, 10_000, {"%RETRY%g": [_answer("%RETRY%g", 0)]}) == [
        ("T", 3_000), ("%RETRY%g", 0)]
    assert _plan(clock, retries, 10_000, {}) == [("T", 10_000)]


def test_a_filter_that_moved_the_positions_asks_again_while_time_remains() -> None:
    clock = Clock()
    moved = {"messages": [], "next_offsets": {"0": 5}}
    assert _plan(clock, None, 1_000, {"T": [moved]}, spend_waits=False) == [
        ("T", 1_000), ("T", 1_000)]


def test_a_retry_poll_interval_below_1_ms_is_refused() -> None:
    with pytest.raises(ValueError, match="retry_poll_interval_ms"):
        RetryPolling("", "g", poll_interval_ms=0)
