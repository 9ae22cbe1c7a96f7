"""Consumer retries, dead letters and delay levels, with Apache RocketMQ's Go client.

The Go version of test_java_retries.py, with rocketmq-client-go/v2 (the modes `retry`, `dlq`
and `delay` of tests/remoting_clients/go/main.go, in tests/remoting_clients/go/redelivery.go
and tests/remoting_clients/go/delayed.go).  A push consumer whose callback returns
`consumer.ConsumeRetryLater` makes the client send the message back (CONSUMER_SEND_MSG_BACK,
code 36); the broker redelivers it through `%RETRY%<group>` after delay level 3 +
reconsumeTimes, and once reconsumeTimes reaches the consumer's maxReconsumeTimes
(`consumer.WithMaxReconsumeTimes`) stores it in `%DLQ%<group>`.  A message sent with
`WithDelayTimeLevel` reaches its topic after that level's wait.  Both systems run with the
delay table of delay_levels.py (level n waits n seconds).

The Go program reports each delivery with its time; the verdict is here, against the table,
with the windows of test_java_retries.py.  Each test prints what it measured (run with `-s`).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from tests.remoting_clients.delay_levels import delay_ms
from tests.remoting_clients.go_client import GoClient
from tests.remoting_clients.test_java_retries import (
    CLAMP_LEVEL,
    COUNT,
    DELAY_EARLY_MS,
    DELAY_LATE_MS,
    DELAY_LEVEL,
    FIRST_RETRY_LEVEL,
    MAX_RECONSUME_TIMES,
    RETRY_EARLY_MS,
    RETRY_LATE_MS,
)

pytestmark = pytest.mark.remoting_clients

TIMEOUT_S = 30


@pytest.fixture(scope="session")
def go_client() -> GoClient:
    return GoClient.build()


def shown(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)


def gaps_ms(deliveries: list[dict[str, Any]]) -> list[int]:
    """The time from each delivery to the next."""
    times = [delivery["atMs"] for delivery in deliveries]
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def report(request: pytest.FixtureRequest, what: str, figures: list[list[int]]) -> None:
    flat = [value for one in figures for value in one]
    print(f"\n{request.node.name}: {what} (ms, per message): {figures}; "
          f"min {min(flat, default=None)} max {max(flat, default=None)}")


def assert_redeliveries(result: dict[str, Any], topic: str, rounds: int) -> None:
    """Each message came once per round, reconsumeTimes 0..rounds-1, with its content, in the
    original topic; the first delivery where its send put it, the later ones from
    `%RETRY%<group>`, the k-th after level 3 + k - 1's wait, with RETRY_TOPIC = the topic and
    ORIGIN_MESSAGE_ID = the store id of the first delivery (as the broker's send-back sets it)."""
    retry_topic = f"%RETRY%{result['group']}"
    assert result["sent"] == COUNT, shown(result)
    assert result["strangers"] == 0, shown(result)
    assert len(result["messages"]) == COUNT, shown(result)
    for message in result["messages"]:
        deliveries = message["deliveries"]
        assert [d["reconsumeTimes"] for d in deliveries] == list(range(rounds)), shown(message)
        assert [d["topic"] for d in deliveries] == [topic] * rounds, shown(message)
        assert all(d["mismatches"] == [] for d in deliveries), shown(message)
        first, later = deliveries[0], deliveries[1:]
        assert (first["queueTopic"], first["queueId"], first["queueOffset"]) == \
            (topic, message["queueId"], message["queueOffset"]), shown(message)
        assert [d["queueTopic"] for d in later] == [retry_topic] * (rounds - 1), shown(message)
        for k, measured in enumerate(gaps_ms(deliveries)):
            wanted = delay_ms(FIRST_RETRY_LEVEL + k)
            assert wanted - RETRY_EARLY_MS <= measured <= wanted + RETRY_LATE_MS, shown(message)
        assert first["offsetMsgId"], shown(message)
        assert [d["retryTopic"] for d in later] == [topic] * (rounds - 1), shown(message)
        assert [d["originMessageId"] for d in later] == [first["offsetMsgId"]] * (rounds - 1), \
            shown(message)


def test_a_failed_message_is_redelivered_once_after_level_3(
        go_client: GoClient, namesrv: str, topic: str, request: pytest.FixtureRequest) -> None:
    """The callback fails each message's first delivery and accepts its second."""
    result = go_client.run(namesrv=namesrv, topic=topic, mode="retry", count=COUNT,
                           timeout_s=TIMEOUT_S)
    report(request, f"redelivery after level {FIRST_RETRY_LEVEL} "
                    f"({delay_ms(FIRST_RETRY_LEVEL)} ms)",
           [gaps_ms(message["deliveries"]) for message in result["messages"]])
    assert result["allDelivered"] is True, shown(result)
    assert_redeliveries(result, topic, rounds=2)


def test_a_message_failed_past_max_reconsume_times_goes_to_the_dlq(
        go_client: GoClient, namesrv: str, topic: str, request: pytest.FixtureRequest) -> None:
    """WithMaxReconsumeTimes(2), every delivery fails: three deliveries (reconsumeTimes 0, 1,
    2), then none, and each message is in `%DLQ%<group>` (read back by a push consumer of
    another group) with reconsumeTimes 3 and RETRY_TOPIC = the topic."""
    rounds = MAX_RECONSUME_TIMES + 1
    # No fourth delivery in the wait a further retry (level 3 + 2) would take, and a second.
    quiet_ms = delay_ms(FIRST_RETRY_LEVEL + MAX_RECONSUME_TIMES) + 1000
    result = go_client.run(namesrv=namesrv, topic=topic, mode="dlq", count=COUNT,
                           max_reconsume_times=MAX_RECONSUME_TIMES, quiet_ms=quiet_ms,
                           timeout_s=TIMEOUT_S)
    report(request, f"redeliveries after levels {FIRST_RETRY_LEVEL}, {FIRST_RETRY_LEVEL + 1}",
           [gaps_ms(message["deliveries"]) for message in result["messages"]])
    read = result["dlqRead"]
    print(f"{request.node.name}: no delivery for {result['quietMs']} ms after the last; "
          f"{len(read.get('messages', []))} read back from {result['dlqTopic']}, reconsumeTimes "
          f"{[d['reconsumeTimes'] for m in read.get('messages', []) for d in m['deliveries']]}")
    assert result["allDelivered"] is True, shown(result)
    assert_redeliveries(result, topic, rounds=rounds)
    assert result["quietMs"] > delay_ms(FIRST_RETRY_LEVEL + MAX_RECONSUME_TIMES), shown(result)
    dlq_topic = f"%DLQ%{result['group']}"
    assert result["dlqTopic"] == dlq_topic, shown(result)
    assert "routeError" not in read, shown(result)
    assert read["strangers"] == 0, shown(result)
    firsts = {m["index"]: m["deliveries"][0]["offsetMsgId"] for m in result["messages"]}
    assert len(read["messages"]) == COUNT, shown(result)
    for message in read["messages"]:
        assert len(message["deliveries"]) == 1, shown(message)
        dead = message["deliveries"][0]
        assert dead["topic"] == dead["queueTopic"] == dlq_topic, shown(message)
        assert dead["mismatches"] == [], shown(message)
        assert dead["reconsumeTimes"] == rounds, shown(message)
        assert dead["retryTopic"] == topic, shown(message)
        assert dead["originMessageId"] == firsts[message["index"]], shown(message)


def test_a_delayed_message_arrives_after_its_level(
        go_client: GoClient, namesrv: str, topic: str, request: pytest.FixtureRequest) -> None:
    """Level 2 (2 s): each message once, 2 s after its send, in the queue the send named.
    Level 99 is clamped to 18 (18 s): its send succeeds and it does not arrive early."""
    wanted = delay_ms(DELAY_LEVEL)
    result = go_client.run(namesrv=namesrv, topic=topic, mode="delay", count=COUNT,
                           level=DELAY_LEVEL, clamp_level=CLAMP_LEVEL,
                           wait_ms=wanted + DELAY_LATE_MS, timeout_s=TIMEOUT_S)
    sends = result["sends"]
    messages = result["messages"]
    delays = [[d["atMs"] - send["sentAtMs"] for d in messages[send["index"]]["deliveries"]]
              for send in sends[:COUNT]]
    report(request, f"arrival after send, level {DELAY_LEVEL} ({wanted} ms)", delays)
    assert result["warmUpReceived"] is True, shown(result)
    assert [send.get("status") for send in sends] == ["SEND_OK"] * (COUNT + 1), shown(result)
    assert [send["delayLevel"] for send in sends] == [DELAY_LEVEL] * COUNT + [CLAMP_LEVEL]
    assert [send["index"] for send in sends] == [*range(COUNT), COUNT + 1], shown(result)
    assert result["strangers"] == 0, shown(result)
    for send, measured in zip(sends[:COUNT], delays, strict=True):
        deliveries = messages[send["index"]]["deliveries"]
        assert len(measured) == 1, shown(result)
        assert wanted - DELAY_EARLY_MS <= measured[0] <= wanted + DELAY_LATE_MS, shown(result)
        assert deliveries[0]["topic"] == topic, shown(result)
        assert deliveries[0]["queueId"] == send["queueId"], shown(result)
        assert deliveries[0]["mismatches"] == [], shown(result)
    assert len(messages[COUNT]["deliveries"]) == 1, shown(result)  # the warm-up, not delayed
    assert delay_ms(CLAMP_LEVEL) == delay_ms(18)
    assert messages[COUNT + 1]["deliveries"] == [], shown(result)
