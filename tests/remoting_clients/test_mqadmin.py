"""Apache RocketMQ's `mqadmin` (rocketmq-tools 5.5.0) against each target.

A module fixture creates a topic of 8 queues with `updateTopic`, sends 40 messages into it with
the Java client and consumes them with a push consumer group; each test then asks mqadmin
about that state and compares with what the client reported it sent.  mqadmin exits 0 even
when a command fails, so every check reads the output (`AdminResult.failed`).

Only the 5.5.0 tools: 4.9.8's clusterList stops on a NullPointerException against a 5.x broker
(it reads a statistic 5.x renamed), a RocketMQ incompatibility, not a server's fault.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from tests.remoting_clients.java_clients import CLIENT_5, JavaClients
from tests.remoting_clients.mqadmin import AdminResult, MqAdmin

pytestmark = pytest.mark.remoting_clients

COUNT = 40
QUEUES = 8
PERMISSION_WAIT_S = 30.0
"""RocketMQ's broker registers again at once after a brokerPermission change; the name
server's route follows."""


@dataclass(frozen=True)
class Populated:
    admin: MqAdmin
    namesrv: str
    cluster: str
    broker_name: str
    broker_addr: str
    topic: str
    group: str
    sent: list[dict[str, Any]]

    def run(self, command: str, *args: str) -> AdminResult:
        result = self.admin.run(command, self.namesrv, *args)
        assert not result.failed, result.output
        return result


@pytest.fixture(scope="module", params=[CLIENT_5], ids=lambda v: f"tools-{v}")
def populated(request: pytest.FixtureRequest, namesrv: str) -> Populated:
    clients = JavaClients.build(request.param)
    admin = MqAdmin(clients)
    rows = admin.run("clusterList", namesrv).table()
    assert rows, "clusterList printed no broker"
    cluster, broker_name, _broker_id, broker_addr = rows[0][:4]
    topic, group = f"adm-{uuid.uuid4().hex[:10]}", f"adm-g-{uuid.uuid4().hex[:10]}"
    created = admin.run("updateTopic", namesrv, "-c", cluster, "-t", topic,
                        "-r", str(QUEUES), "-w", str(QUEUES))
    assert not created.failed, created.output
    result = clients.run("push-concurrently", namesrv=namesrv, topic=topic, group=group,
                         count=COUNT, report_sent=True)
    assert result["ok"], result
    return Populated(admin=admin, namesrv=namesrv, cluster=cluster, broker_name=broker_name,
                     broker_addr=broker_addr, topic=topic, group=group,
                     sent=result["sentMessages"])


def test_cluster_list_names_a_loopback_broker(populated: Populated) -> None:
    assert populated.broker_addr.startswith("127.0.0.1:")


def test_topic_list_and_route(populated: Populated) -> None:
    assert populated.topic in populated.run("topicList").output.split()
    route = populated.run("topicRoute", "-t", populated.topic).output
    assert f'"writeQueueNums":{QUEUES}' in route
    assert f'"readQueueNums":{QUEUES}' in route
    assert populated.broker_addr in route


def test_topic_status_counts_every_message(populated: Populated) -> None:
    rows = populated.run("topicStatus", "-t", populated.topic).table()
    assert sorted(int(row[1]) for row in rows) == list(range(QUEUES))
    assert all(int(row[2]) == 0 for row in rows)
    assert sum(int(row[3]) for row in rows) == COUNT


@pytest.mark.parametrize("index", [0, 17, COUNT - 1])
def test_query_by_key(populated: Populated, index: int) -> None:
    sent = populated.sent[index]
    unique_key = sent["keys"].split()[0]
    rows = populated.run("queryMsgByKey", "-t", populated.topic, "-k", unique_key).table()
    assert [row[0] for row in rows] == [sent["msgId"]]


@pytest.mark.parametrize("index", [0, COUNT - 1])
def test_query_by_id_and_by_offset(populated: Populated, index: int) -> None:
    sent = populated.sent[index]
    by_id = populated.run("queryMsgById", "-t", populated.topic, "-i", sent["offsetMsgId"])
    by_offset = populated.run("queryMsgByOffset", "-t", populated.topic,
                              "-b", populated.broker_name, "-i", str(sent["queueId"]),
                              "-o", str(sent["queueOffset"]))
    for result in (by_id, by_offset):
        assert result.field("Topic") == populated.topic
        assert result.field("Keys") == f"[{sent['keys']}]"
        assert result.field("Tags") == f"[{sent['tags']}]"
        assert result.field("Queue ID") == str(sent["queueId"])
        assert result.field("Queue Offset") == str(sent["queueOffset"])


def _diff_total(populated: Populated) -> int:
    result = populated.run("consumerProgress", "-g", populated.group, "-t", populated.topic)
    value = result.field("Consume Diff Total")
    assert value is not None, result.output
    return int(value)


def test_consumer_progress_then_reset_offset_by_time(populated: Populated) -> None:
    """The push consumer committed everything; a reset to time 0 makes it all unconsumed."""
    assert _diff_total(populated) == 0
    reset = populated.run("resetOffsetByTime", "-g", populated.group, "-t", populated.topic,
                          "-s", "0")
    assert len(reset.table()) == QUEUES
    assert _diff_total(populated) == COUNT


def test_broker_status(populated: Populated) -> None:
    result = populated.run("brokerStatus", "-b", populated.broker_addr)
    max_offset = result.field("commitLogMaxOffset")
    assert max_offset is not None and int(max_offset) > 0, result.output


def test_update_then_delete_topic(populated: Populated) -> None:
    topic = f"adm-del-{uuid.uuid4().hex[:10]}"
    populated.run("updateTopic", "-c", populated.cluster, "-t", topic, "-r", "2", "-w", "2")
    assert topic in populated.run("topicList").output.split()
    populated.run("deleteTopic", "-c", populated.cluster, "-t", topic)
    assert topic not in populated.run("topicList").output.split()
    gone = populated.admin.run("topicRoute", populated.namesrv, "-t", topic)
    assert gone.failed, gone.output


def _route_perms(populated: Populated) -> set[int]:
    route = populated.run("topicRoute", "-t", populated.topic).output
    return {int(perm) for perm in re.findall(r'"perm"\s*:\s*(\d+)', route)}


def _wait_route_perms(populated: Populated, perms: set[int]) -> None:
    deadline = time.monotonic() + PERMISSION_WAIT_S
    while (found := _route_perms(populated)) != perms:
        assert time.monotonic() < deadline, f"route perms {found}, not {perms}"
        time.sleep(0.5)


def test_broker_permission_makes_the_broker_read_only_then_writable(
        populated: Populated) -> None:
    """`updateBrokerConfig -k brokerPermission -v 4`, how a RocketMQ broker is drained: the
    topic's route says read only, `getBrokerConfig` shows it; 6 undoes it."""
    broker = ("-b", populated.broker_addr, "-k", "brokerPermission")
    try:
        populated.run("updateBrokerConfig", *broker, "-v", "4")
        _wait_route_perms(populated, {4})
        config = populated.run("getBrokerConfig", "-b", populated.broker_addr).output
        assert re.search(r"brokerPermission\s*=\s*4\b", config), config
    finally:
        populated.run("updateBrokerConfig", *broker, "-v", "6")
    _wait_route_perms(populated, {6})
