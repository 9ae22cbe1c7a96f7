"""Consumer retries, dead letters and delay levels, with Apache RocketMQ's remoting Java client.

A push consumer (CLUSTERING, concurrently) whose listener answers RECONSUME_LATER makes the
client send the message back (CONSUMER_SEND_MSG_BACK, code 36); the broker redelivers it
through `%RETRY%<group>` after delay level 3 + reconsumeTimes, and once reconsumeTimes reaches
the consumer's maxReconsumeTimes stores it in `%DLQ%<group>`.  A message sent with a delay
level reaches its topic after that level's wait.  Both systems run with the delay table of
delay_levels.py (level n waits n seconds), so each scenario takes seconds.

The scenarios (`Redelivery.java`, `Delayed.java`) give their own verdict (`ok`, `problems`);
the tests here check the per-message facts again against the table, so a scenario that
measured nothing cannot pass.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.remoting_clients.delay_levels import TEST_DELAY_LEVELS, delay_ms
from tests.remoting_clients.java_clients import JavaClients

pytestmark = pytest.mark.remoting_clients

COUNT = 5
FIRST_RETRY_LEVEL = 3
"""The broker retries a message sent back with delayLevel 0 at level 3 + reconsumeTimes."""
RETRY_EARLY_MS, RETRY_LATE_MS = 500, 5000
"""A redelivery may come this much before or after its level's wait, measured from the
delivery before it (the broker stores the send-back a moment after the listener saw it)."""
DELAY_EARLY_MS, DELAY_LATE_MS = 200, 3000
"""A delayed message may arrive this much before or after its level's wait after its send."""
MAX_RECONSUME_TIMES = 2
DELAY_LEVEL = 2
CLAMP_LEVEL = 99
"""Above the table's 18 levels: the broker clamps it to 18 (18 s); nothing waits that long."""


def shown(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)


def assert_each_round_once(result: dict[str, Any], rounds: int) -> None:
    """Every message came exactly once per round (reconsumeTimes 0, 1, ...), as sent."""
    assert result["sent"] == COUNT, shown(result)
    assert len(result["rounds"]) == rounds, shown(result)
    for verdict in result["rounds"]:
        assert verdict["expected"] == COUNT and verdict["received"] == COUNT, shown(result)
        assert verdict["missingCount"] == verdict["duplicates"] == 0, shown(result)
        assert verdict["unexpected"] == verdict["mismatchCount"] == 0, shown(result)
    assert result["strangers"] == 0, shown(result)


def assert_redeliveries(result: dict[str, Any], topic: str, rounds: int) -> None:
    """Each message's deliveries: reconsumeTimes 0..rounds-1, the k-th redelivery after level
    3 + k - 1's wait, always in the original topic; redeliveries carry RETRY_TOPIC and
    ORIGIN_MESSAGE_ID (the store id of the first delivery, as the broker's send-back sets it)."""
    assert len(result["messages"]) == COUNT, shown(result)
    for message in result["messages"]:
        assert message["reconsumeTimes"] == list(range(rounds)), shown(message)
        assert message["topics"] == [topic] * rounds, shown(message)
        assert len(message["delaysMs"]) == rounds - 1, shown(message)
        for k, measured in enumerate(message["delaysMs"]):
            wanted = delay_ms(FIRST_RETRY_LEVEL + k)
            assert wanted - RETRY_EARLY_MS <= measured <= wanted + RETRY_LATE_MS, shown(message)
        assert message["retryTopic"][1:] == [topic] * (rounds - 1), shown(message)
        first_id = message["firstOffsetMsgId"]
        assert first_id, shown(message)
        assert message["originMessageId"][1:] == [first_id] * (rounds - 1), shown(message)


def test_a_failed_message_is_redelivered_once_after_level_3(
        java_clients: JavaClients, namesrv: str, topic: str) -> None:
    """The listener fails each message's first delivery and accepts its second."""
    result = java_clients.run("retry", namesrv=namesrv, topic=topic, count=COUNT,
                              delay_levels=TEST_DELAY_LEVELS, early_ms=RETRY_EARLY_MS,
                              late_ms=RETRY_LATE_MS)
    assert result["allDelivered"] is True, shown(result)
    assert_each_round_once(result, rounds=2)
    assert_redeliveries(result, topic, rounds=2)
    assert result["problems"] == [], shown(result)
    assert result["ok"] is True, shown(result)


def test_a_message_failed_past_max_reconsume_times_goes_to_the_dlq(
        java_clients: JavaClients, namesrv: str, topic: str) -> None:
    """maxReconsumeTimes 2, every delivery fails: three deliveries (reconsumeTimes 0, 1, 2),
    then none, and each message is in `%DLQ%<group>` (routable: read by an assigned lite
    pull consumer) with reconsumeTimes 3 and RETRY_TOPIC = the topic."""
    rounds = MAX_RECONSUME_TIMES + 1
    result = java_clients.run("dlq", namesrv=namesrv, topic=topic, count=COUNT,
                              delay_levels=TEST_DELAY_LEVELS, early_ms=RETRY_EARLY_MS,
                              late_ms=RETRY_LATE_MS, max_reconsume_times=MAX_RECONSUME_TIMES)
    assert result["allDelivered"] is True, shown(result)
    assert_each_round_once(result, rounds=rounds)
    assert_redeliveries(result, topic, rounds=rounds)
    # No fourth delivery in the wait a further retry (level 3 + 2) would have taken.
    assert result["quietMs"] > delay_ms(FIRST_RETRY_LEVEL + MAX_RECONSUME_TIMES), shown(result)
    assert "routeError" not in result["dlqRead"], shown(result)
    assert result["dlqRead"]["queues"] >= 1, shown(result)
    dlq = result["dlq"]
    assert dlq["expected"] == dlq["received"] == COUNT, shown(result)
    assert dlq["missingCount"] == dlq["duplicates"] == dlq["mismatchCount"] == 0, shown(result)
    dlq_topic = f"%DLQ%{result['group']}"
    for message in result["messages"]:
        dead = message["dlq"]
        assert dead["topic"] == dlq_topic, shown(message)
        assert dead["reconsumeTimes"] == rounds, shown(message)
        assert dead["retryTopic"] == topic, shown(message)
        assert dead["originMessageId"] == message["firstOffsetMsgId"], shown(message)
    assert result["problems"] == [], shown(result)
    assert result["ok"] is True, shown(result)


def test_a_delayed_message_arrives_after_its_level(
        java_clients: JavaClients, namesrv: str, topic: str) -> None:
    """Level 2 (2 s): each message once, 2 s after its send, in the queue the send named.
    Level 99 is clamped to 18 (18 s): its send succeeds and it does not arrive early."""
    result = java_clients.run("delay", namesrv=namesrv, topic=topic, count=COUNT,
                              level=DELAY_LEVEL, clamp_level=CLAMP_LEVEL,
                              delay_levels=TEST_DELAY_LEVELS, early_ms=DELAY_EARLY_MS,
                              late_ms=DELAY_LATE_MS)
    assert result["warmUpReceived"] is True, shown(result)
    sends = result["sends"]
    assert [send.get("status") for send in sends] == ["SEND_OK"] * (COUNT + 1), shown(result)
    assert [send["delayLevel"] for send in sends] == [DELAY_LEVEL] * COUNT + [CLAMP_LEVEL]
    assert result["expected"] == result["received"] == COUNT, shown(result)
    assert result["missingCount"] == result["duplicates"] == 0, shown(result)
    assert result["unexpected"] == result["mismatchCount"] == 0, shown(result)
    wanted = delay_ms(DELAY_LEVEL)
    delayed, clamped = result["messages"][:COUNT], result["messages"][COUNT]
    for message, send in zip(delayed, sends[:COUNT], strict=True):
        assert message["deliveries"] == 1, shown(result)
        assert wanted - DELAY_EARLY_MS <= message["delayMs"] <= wanted + DELAY_LATE_MS, \
            shown(result)
        assert message["queueId"] == send["queueId"], shown(result)
    assert clamped["expectedDelayMs"] == delay_ms(CLAMP_LEVEL) == delay_ms(18), shown(result)
    assert clamped["deliveries"] == 0, shown(result)
    assert result["problems"] == [], shown(result)
    assert result["ok"] is True, shown(result)
