"""SQL92 filters (`MessageSelector.bySql`) with Apache RocketMQ's remoting Java client.

The producer sends 14 messages whose property `a` is 0..9, absent (twice), "x" and "7.5"
(`SqlFilter.java`).  A push consumer and a lite pull consumer, each with `bySql("a > 5")`,
must receive exactly a = 6..9: the broker filters (the client does not), the integer literal
makes it read `a` as a Java Integer (so "7.5" and "x" throw and do not match), and a message
without `a` gives null, not a match.  A consumer whose expression does not compile fails to
start: its CHECK_CLIENT_CONFIG is answered 23.  RocketMQ runs with `enablePropertyFilter=true`
(rocketmq_peer.py); mqstore serves SQL92 by default (`remoting.property_filter_enabled`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.remoting_clients.java_clients import JavaClients

pytestmark = pytest.mark.remoting_clients

COUNT = 14
MATCHING = [6, 7, 8, 9]
"""The indexes of the messages whose `a` is an integer above 5."""
SUBSCRIPTION_PARSE_FAILED = 23
TIMEOUT_S = 30


def shown(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)


def assert_exactly_the_matching(result: dict[str, Any]) -> None:
    assert result["sent"] == COUNT, shown(result)
    assert result["expectedIndexes"] == MATCHING, shown(result)
    assert result["expected"] == result["received"] == len(MATCHING), shown(result)
    assert result["missingCount"] == result["duplicates"] == 0, shown(result)
    assert result["unexpected"] == result["mismatchCount"] == 0, shown(result)
    assert result["ok"] is True, shown(result)


@pytest.mark.parametrize("consumer", ["push", "lite"])
def test_a_consumer_with_a_sql92_selector_gets_exactly_the_matches(
        java_clients: JavaClients, namesrv: str, topic: str, consumer: str) -> None:
    result = java_clients.run("sql92", namesrv=namesrv, topic=topic, consumer=consumer,
                              timeout_s=TIMEOUT_S)
    assert result["expression"] == "a > 5", shown(result)
    assert_exactly_the_matching(result)


def test_a_consumer_with_a_bad_expression_does_not_start(
        java_clients: JavaClients, namesrv: str, topic: str) -> None:
    result = java_clients.run("sql92", namesrv=namesrv, topic=topic, consumer="refused",
                              timeout_s=TIMEOUT_S)
    assert result["expression"] == "a >", shown(result)
    for consumer in ("push", "lite"):
        start = result[consumer]
        assert start["ok"] is False, shown(result)
        first = start["errors"][0]
        assert first["class"].endswith("MQClientException"), shown(result)
        assert first["responseCode"] == SUBSCRIPTION_PARSE_FAILED, shown(result)
