"""`mqstore namesrv` (services/namesrv/) with Apache RocketMQ 5.5.0 brokers and clients.

RocketMQ 5.5.0 brokers (rocketmq_peer.py, `namesrv=`) register with `mqstore namesrv` and
no RocketMQ name server runs: RocketMQ's Java client 5.5.0, given only mqstore's name
server, produces and consumes every message once, first with one broker group, then with
two groups of one cluster (`broker-a`, `broker-b`) whose route lists both groups' queues;
`broker-b` registers with compressed bodies and QUERY_DATA_VERSION, `broker-a` as by default.
`mqadmin` reads the cluster and routes from it, and a broker that stops leaves the routes.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.processes import MQSTORE
from tests.remoting_clients.java_clients import CLIENT_5, JavaClients, assert_every_message_once
from tests.remoting_clients.mqadmin import MqAdmin
from tests.remoting_clients.raw_remoting import route_of
from tests.remoting_clients.rocketmq_peer import BROKER_NAME, RocketMqPeer, free_port

pytestmark = pytest.mark.remoting_clients

COUNT = 60
QUEUES = 4
START_TIMEOUT_S = 30.0
ROUTE_TIMEOUT_S = 60.0
SECOND_BROKER = "broker-b"
SECOND_BROKER_SETTINGS: dict[str, object] = {
    "brokerName": SECOND_BROKER,
    # Its registrations are deflated (sent with compressed=false all the same), and it asks
    # QUERY_DATA_VERSION before each periodic one, registering only when its topics changed.
    "compressedRegister": "true", "forceRegister": "false"}


@dataclass(frozen=True)
class NameServer:
    address: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def name_server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NameServer]:
    """`mqstore namesrv` on a free loopback port for the module, its output in a file."""
    port = free_port()
    server = NameServer(f"127.0.0.1:{port}",
                        tmp_path_factory.mktemp("namesrv") / "namesrv.out")
    with open(server.log_path, "wb") as output:
        process = subprocess.Popen([*MQSTORE, "namesrv", "--port", str(port),
                                    "--log-level", "WARNING"],
                                   stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while f"listening on {server.address}" not in server.log():
            assert process.poll() is None, server.log()
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=START_TIMEOUT_S)


@pytest.fixture(scope="module")
def name_server(name_server_process: NameServer) -> str:
    return name_server_process.address


@pytest.fixture(scope="module")
def broker_a(name_server: str) -> Iterator[RocketMqPeer]:
    with RocketMqPeer.start(namesrv=name_server) as peer:
        yield peer


@pytest.fixture(scope="module")
def java_clients() -> JavaClients:
    return JavaClients.build(CLIENT_5)


def wait_for_groups(namesrv: str, topic: str, names: list[str]) -> dict[str, Any]:
    """The topic's route once its queue data names exactly `names`."""
    deadline = time.monotonic() + ROUTE_TIMEOUT_S
    while True:
        route = route_of(namesrv, topic)
        if route is not None and sorted(q["brokerName"] for q in route["queueDatas"]) == names:
            return route
        assert time.monotonic() < deadline, f"route of {topic}: {route}, not {names}"
        time.sleep(0.2)


def test_one_group_serves_a_client_routed_by_mqstore_namesrv(
        name_server: str, broker_a: RocketMqPeer, java_clients: JavaClients) -> None:
    """The topic does not exist: the producer is routed by TBW102 (which the broker
    registered), the broker creates the topic and registers it, the consumer finds it."""
    topic = f"ns-one-{uuid.uuid4().hex[:10]}"
    result = java_clients.run("produce", namesrv=name_server, topic=topic, mode="sync",
                              count=COUNT)
    assert_every_message_once(result, count=COUNT)
    route = wait_for_groups(name_server, topic, [BROKER_NAME])
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": broker_a.broker}


def test_two_groups_of_one_cluster(name_server: str, broker_a: RocketMqPeer,
                                   java_clients: JavaClients) -> None:
    admin = MqAdmin(java_clients)
    with RocketMqPeer.start(namesrv=name_server, broker_settings=SECOND_BROKER_SETTINGS
                            ) as broker_b:
        rows = admin.run("clusterList", name_server).table()
        assert sorted(row[1] for row in rows) == [BROKER_NAME, SECOND_BROKER], rows
        topic = f"ns-two-{uuid.uuid4().hex[:10]}"
        created = admin.run("updateTopic", name_server, "-c", "DefaultCluster", "-t", topic,
                            "-r", str(QUEUES), "-w", str(QUEUES))
        assert not created.failed, created.output
        route = wait_for_groups(name_server, topic, [BROKER_NAME, SECOND_BROKER])
        assert {data["brokerName"]: data["brokerAddrs"] for data in route["brokerDatas"]} == {
            BROKER_NAME: {"0": broker_a.broker}, SECOND_BROKER: {"0": broker_b.broker}}
        assert {q["writeQueueNums"] for q in route["queueDatas"]} == {QUEUES}
        shown = admin.run("topicRoute", name_server, "-t", topic)
        assert not shown.failed and broker_b.broker in shown.output, shown.output
        listed = admin.run("topicList", name_server)
        assert not listed.failed and topic in listed.output.split(), listed.output
        result = java_clients.run("produce", namesrv=name_server, topic=topic, mode="sync",
                                  count=COUNT, report_sent=True)
        assert_every_message_once(result, count=COUNT)
        # the producer spread the sends over both groups: each stored some (offsetMsgId =
        # the storing broker's IPv4 and port, 8 hex digits each, then the commit log offset)
        stored_by = {f"127.0.0.1:{int(sent['offsetMsgId'][8:16], 16)}"
                     for sent in result["sentMessages"]}
        assert stored_by == {broker_a.broker, broker_b.broker}, stored_by
    # broker-b stopped (it unregisters, and its connection closes): only broker-a is left
    wait_for_groups(name_server, topic, [BROKER_NAME])


def test_no_registration_was_refused(name_server_process: NameServer) -> None:
    """Every REGISTER_BROKER of the brokers above was taken (bodies, CRC, bounds)."""
    assert "registration refused" not in name_server_process.log()
