"""Apache RocketMQ's Go client (rocketmq-client-go/v2) produces and consumes on each target."""

from __future__ import annotations

import pytest

from tests.remoting_clients.go_client import GoClient

pytestmark = pytest.mark.remoting_clients

COUNT = 50


@pytest.fixture(scope="session")
def go_client() -> GoClient:
    return GoClient.build()


def test_go_produce_then_push_consume(go_client: GoClient, namesrv: str, topic: str) -> None:
    result = go_client.run(namesrv=namesrv, topic=topic, count=COUNT)
    assert result["sent"] == COUNT, result
    assert result["expected"] == COUNT, result
    assert result["missingCount"] == 0, result
    assert result["duplicates"] == 0, result
    assert result["unexpected"] == 0, result
    assert result["mismatches"] == [], result
    assert result["received"] == COUNT, result
    assert result["ok"] is True, result
