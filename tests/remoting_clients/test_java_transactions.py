"""Transactional messages with Apache RocketMQ's remoting Java client (`TransactionMQProducer`).

The scenario (`Transactions.java`) sends six messages in transactions: by index mod 3 the
local transaction answers COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW, and the producer's
`checkLocalTransaction` commits the unknown ones when the broker asks (CHECK_TRANSACTION_STATE).
A push consumer must get each committed and each checked-then-committed message once and
never a rolled-back one.  Both systems check every 2 s the halves older than 4 s
(transaction_checks.py), so the scenario takes seconds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.remoting_clients.java_clients import JavaClients

pytestmark = pytest.mark.remoting_clients

COUNT = 6
TAIL_MS = 5_000
"""Listening after the last committed message arrived: past the check timeout and two check
passes more, for a rolled-back message or a second delivery that must not come."""


def shown(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)


def test_commits_arrive_once_rollbacks_never_and_unknowns_after_their_check(
        java_clients: JavaClients, namesrv: str, topic: str) -> None:
    result = java_clients.run("transaction", namesrv=namesrv, topic=topic, count=COUNT,
                              tail_ms=TAIL_MS)
    assert result["ok"] is True, shown(result)
    assert [send["ok"] for send in result["sends"]] == [True] * COUNT, shown(result)
    by_decision: dict[str, list[int]] = {}
    for message in result["messages"]:
        by_decision.setdefault(message["decision"], []).append(message["deliveries"])
    assert by_decision == {"commit": [1, 1], "rollback": [0, 0], "unknown": [1, 1]}, \
        shown(result)
    for message in result["messages"]:
        if message["decision"] == "unknown":
            assert message["checks"] >= 1, shown(result)
