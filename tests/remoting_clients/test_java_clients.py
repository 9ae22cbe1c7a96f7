"""Apache RocketMQ's remoting Java client (4.9.8 and 5.5.0) against each target's name server.

Every scenario sends the corpus (`java/clients/src/org/mqstore/clients/Corpus.java`), reads
it back and compares each message field by field; the JSON verdict lists what was missing,
duplicated or different.  The expected counts are recomputed here from what the scenario
reports it sent, so a scenario that checked nothing cannot pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.remoting_clients.java_clients import JavaClients

pytestmark = pytest.mark.remoting_clients

COUNT = 60
TAGS = ("TagA", "TagB", "TagC")
"""Message i has tag TAGS[i % 3] (Corpus.tag)."""


def assert_all_received(result: dict[str, Any], *, expected: int) -> None:
    assert result["expected"] == expected, result
    assert result["missingCount"] == 0, result
    assert result["duplicates"] == 0, result
    assert result["unexpected"] == 0, result
    assert result["mismatches"] == [], result
    assert result["received"] == expected, result
    assert result["ok"] is True, result


def test_the_checker_catches_every_kind_of_difference(java_clients: JavaClients) -> None:
    """No server: the Checker gets messages spoiled one field at a time (SelfTest.java)."""
    cases = java_clients.check_selftest()["cases"]
    assert cases.pop("exact") == {"expected": 1, "received": 1, "missingCount": 0,
                                  "missing": [], "duplicates": 0, "unexpected": 0,
                                  "mismatchCount": 0, "mismatches": [], "ok": True}
    for field in ("body", "tags", "keys", "propertyChanged", "propertyAdded",
                  "propertyDropped", "msgId", "queueId", "queueOffset"):
        assert cases[field]["mismatchCount"] == 1, (field, cases[field])
        assert cases[field]["ok"] is False, (field, cases[field])
    assert cases["duplicate"]["duplicates"] == 1 and cases["duplicate"]["ok"] is False
    assert cases["missing"]["missingCount"] == 1 and cases["missing"]["ok"] is False
    assert cases["unexpected"]["unexpected"] == 1 and cases["unexpected"]["ok"] is False


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "batch", "selector"])
def test_produce_then_read_back(java_clients: JavaClients, namesrv: str, topic: str,
                                mode: str) -> None:
    result = java_clients.run("produce", namesrv=namesrv, topic=topic, mode=mode, count=COUNT)
    assert result["sent"] == COUNT
    assert_all_received(result, expected=COUNT)


@pytest.mark.parametrize("expression", ["*", "TagA || TagB"])
def test_lite_pull_subscribe(java_clients: JavaClients, namesrv: str, topic: str,
                             expression: str) -> None:
    result = java_clients.run("lite-subscribe", namesrv=namesrv, topic=topic, count=COUNT,
                              expression=expression)
    accepted = set(TAGS) if expression == "*" else {"TagA", "TagB"}
    assert_all_received(result, expected=sum(TAGS[i % 3] in accepted for i in range(COUNT)))


def test_lite_pull_assign(java_clients: JavaClients, namesrv: str, topic: str) -> None:
    result = java_clients.run("lite-assign", namesrv=namesrv, topic=topic, count=COUNT)
    assert result["queues"] >= 1
    assert_all_received(result, expected=COUNT)


def test_lite_pull_seek(java_clients: JavaClients, namesrv: str, topic: str) -> None:
    """Each queue is sought to half its length: exactly the messages from there come back."""
    result = java_clients.run("lite-seek", namesrv=namesrv, topic=topic, count=COUNT,
                              report_sent=True)
    seek = {int(queue): offset for queue, offset in result["seekOffsets"].items()}
    after_seek = [m for m in result["sentMessages"] if m["queueOffset"] >= seek[m["queueId"]]]
    assert 0 < len(after_seek) < COUNT
    assert_all_received(result, expected=len(after_seek))


def test_push_concurrently(java_clients: JavaClients, namesrv: str, topic: str) -> None:
    result = java_clients.run("push-concurrently", namesrv=namesrv, topic=topic, count=COUNT)
    assert_all_received(result, expected=COUNT)


def test_push_orderly(java_clients: JavaClients, namesrv: str, topic: str) -> None:
    """Sent through a selector (queue i % n); each queue must arrive in offset order."""
    result = java_clients.run("push-orderly", namesrv=namesrv, topic=topic, count=COUNT)
    assert result["mode"] == "selector"
    assert_all_received(result, expected=COUNT)


def test_two_push_consumers_share_the_queues(java_clients: JavaClients, namesrv: str,
                                              topic: str) -> None:
    result = java_clients.run("push-rebalance", namesrv=namesrv, topic=topic, count=COUNT)
    assert result["settled"] is True, result
    queues_a, queues_b = set(result["queuesA"]), set(result["queuesB"])
    assert queues_a and queues_b and not queues_a & queues_b, result
    owners = {int(queue): owner for queue, owner in result["owners"].items()}
    assert owners == {queue: "a" for queue in queues_a} | {queue: "b" for queue in queues_b}
    assert_all_received(result, expected=COUNT)
