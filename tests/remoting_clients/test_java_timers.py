"""5.x timer messages with Apache RocketMQ's 5.5.0 Java client: `TIMER_DELIVER_MS` (what
`Message#setDeliverTimeMs` sets) holds each message until its time, against RocketMQ 5.5.0 and
mqstore.  The `delay` scenario (Delayed.java) in its `--deliver-in-ms` form: each message
asks for its send time + 3 s and must arrive once, in the queue its send named, no earlier
than the broker's precision allows and within DELIVER_LATE_MS after.  The 4.9.8 client has
no timer API (and sees 5.x's timer keys as user properties), so only 5.5.0 runs it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.remoting_clients.delay_levels import TEST_DELAY_LEVELS
from tests.remoting_clients.java_clients import CLIENT_5, JavaClients

pytestmark = pytest.mark.remoting_clients

COUNT = 5
DELIVER_IN_MS = 3000
DELIVER_EARLY_MS = 1000
"""Both brokers floor a due time to their precision (1 s), and move an exact multiple one
precision down: a message may come up to a second early (rocketmq-broker-features §3.7)."""
DELIVER_LATE_MS = 3000


@pytest.fixture(scope="module")
def java_clients_5() -> JavaClients:
    return JavaClients.build(CLIENT_5)


def shown(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)


def test_a_timer_message_arrives_at_its_delivery_time(java_clients_5: JavaClients,
                                                      namesrv: str, topic: str) -> None:
    result = java_clients_5.run("delay", namesrv=namesrv, topic=topic, count=COUNT,
                                deliver_in_ms=DELIVER_IN_MS, delay_levels=TEST_DELAY_LEVELS,
                                early_ms=DELIVER_EARLY_MS, late_ms=DELIVER_LATE_MS)
    assert result["warmUpReceived"] is True, shown(result)
    sends = result["sends"]
    assert [send.get("status") for send in sends] == ["SEND_OK"] * (COUNT + 1), shown(result)
    assert result["expected"] == result["received"] == COUNT, shown(result)
    assert result["missingCount"] == result["duplicates"] == 0, shown(result)
    assert result["unexpected"] == result["mismatchCount"] == 0, shown(result)
    for message, send in zip(result["messages"][:COUNT], sends[:COUNT], strict=True):
        assert message["deliveries"] == 1, shown(result)
        assert DELIVER_IN_MS - DELIVER_EARLY_MS <= message["delayMs"] \
            <= DELIVER_IN_MS + DELIVER_LATE_MS, shown(result)
        assert message["queueId"] == send["queueId"], shown(result)
    assert result["problems"] == [] and result["ok"] is True, shown(result)
