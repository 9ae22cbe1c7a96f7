"""`mqstore up --groups 2` is a RocketMQ cluster a client uses through its one name server
(services/cli/up_groups.py): the name server lists both brokers, RocketMQ's Go client given
only the name server spreads its sends over both groups and reads every message back, and
each group's own store holds what the client says it sent there; RocketMQ's Java producer
at a steady rate loses nothing and fails no send while one group's front is killed and
restarted, its retry taking the sends to the other group.

The topic is made on each group with UPDATE_AND_CREATE_TOPIC (17) on its remoting port, as
`mqadmin updateTopic -c DefaultCluster` does, so its route names both groups before the
first send.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.services.cli.up import UpOptions
from mqstore.services.cli.up_groups import group_layout
from tests.processes import MQSTORE
from tests.remoting.up_process import SMALL_SEGMENTS, UP_READY_LINE
from tests.remoting_clients.go_client import GoClient
from tests.remoting_clients.java_clients import CLIENT_5, JavaClients
from tests.remoting_clients.load_client import LoadRun, assert_nothing_lost, summary
from tests.remoting_clients.mqadmin import AdminResult, MqAdmin
from tests.remoting_clients.raw_remoting import GET_BROKER_CLUSTER_INFO, SUCCESS, request, route_of
from tests.remoting_clients.rocketmq_peer import port_free

pytestmark = pytest.mark.remoting_clients

GROUP_COUNT = 2
MESSAGE_COUNT = 40
QUEUE_COUNT_PER_GROUP = 4
UPDATE_AND_CREATE_TOPIC = 17
READY_TIMEOUT_S = 120.0
"""Six services and a name server on a shared two-core machine: about 15 s when idle."""
ROUTE_TIMEOUT_S = 30.0
"""A front registers a topic change within register_topics_check_interval_ms (1 s)."""
STOP_TIMEOUT_S = 90.0
LAYOUT_ATTEMPTS_MAX = 50


def test_two_groups_behind_one_name_server(tmp_path: Path) -> None:
    go_client = GoClient.build()
    with _up_groups(tmp_path) as (namesrv, groups):
        info = json.loads(request(namesrv, GET_BROKER_CLUSTER_INFO).body)
        assert info["clusterAddrTable"] == {"DefaultCluster": ["mqstore-g0", "mqstore-g1"]}
        for index, group in enumerate(groups):
            assert info["brokerAddrTable"][f"mqstore-g{index}"]["brokerAddrs"] == {
                "0": f"127.0.0.1:{group['remoting']}"}

        topic = f"up-groups-{uuid.uuid4().hex[:12]}"
        for group in groups:
            created = request(f"127.0.0.1:{group['remoting']}", UPDATE_AND_CREATE_TOPIC,
                              ext_fields={"topic": topic,
                                          "readQueueNums": str(QUEUE_COUNT_PER_GROUP),
                                          "writeQueueNums": str(QUEUE_COUNT_PER_GROUP),
                                          "perm": "6"})
            assert created.header["code"] == SUCCESS, created.header
        _wait_route_names(namesrv, topic, {"mqstore-g0", "mqstore-g1"})

        result = go_client.run(namesrv=namesrv, topic=topic, count=MESSAGE_COUNT)
        assert result["ok"] is True, result
        assert result["received"] == MESSAGE_COUNT, result
        assert set(result["sentByBroker"]) == {"mqstore-g0", "mqstore-g1"}, result
        assert result["receivedByBroker"] == result["sentByBroker"], result
        for index, group in enumerate(groups):
            stored = _stored_count(f"http://127.0.0.1:{group['notifier']}", topic)
            assert stored == result["sentByBroker"][f"mqstore-g{index}"], (index, result)


@contextlib.contextmanager
def _up_groups(tmp_path: Path) -> Iterator[tuple[str, list[dict[str, int]]]]:
    """A running `mqstore up --groups 2`: the name server's address and each group's ports;
    stopped with SIGINT after, which must end cleanly."""
    base_ports = _free_layout(tmp_path)
    groups = [group.ports for group in group_layout(
        UpOptions(data_dir=tmp_path, ports=base_ports), group_count=GROUP_COUNT)]
    output_path = tmp_path / "up.out"
    environment = {**os.environ, **SMALL_SEGMENTS}
    for name in ("MQSTORE_REMOTING__PORT", "MQSTORE_WRITER__FORWARD_PORT",
                 "MQSTORE_REMOTING__NAMESRV_ADDRESSES", "MQSTORE_REMOTING__BROKER_NAME"):
        environment.pop(name, None)  # `up` names each group's itself
    with output_path.open("wb") as output, (tmp_path / "up.err").open("wb") as errors:
        process = subprocess.Popen(
            [*MQSTORE, "up", "--data", str(tmp_path / "data"), "--groups", str(GROUP_COUNT),
             *(item for name, port in base_ports.items()
               for item in (f"--{name}-port", str(port)))],
            stdout=output, stderr=errors, stdin=subprocess.DEVNULL, env=environment)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while UP_READY_LINE not in output_path.read_text():
            assert process.poll() is None, _logs(tmp_path)
            assert time.monotonic() < deadline, _logs(tmp_path)
            time.sleep(0.2)
        yield f"127.0.0.1:{base_ports['remoting']}", groups
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    assert code == 0, _logs(tmp_path)
    assert output_path.read_text().endswith("mqstore up: stopped cleanly\n"), _logs(tmp_path)


def _free_layout(tmp_path: Path) -> dict[str, int]:
    """Base ports whose whole layout (name server and both groups) is free on 127.0.0.1,
    with the defaults' last digits (distinct, so no two listeners collide)."""
    for _ in range(LAYOUT_ATTEMPTS_MAX):
        base = random.randrange(20_000, 30_000, 10)
        ports = {"writer": base + 1, "indexer": base + 2, "notifier": base + 3,
                 "remoting": base + 6, "forward": base + 5}
        layout = group_layout(UpOptions(data_dir=tmp_path, ports=ports),
                              group_count=GROUP_COUNT)
        if all(port_free(port) for port in [ports["remoting"], *(
                port for group in layout for port in group.ports.values())]):
            return ports
    raise AssertionError(f"no free layout in {LAYOUT_ATTEMPTS_MAX} tries")


def _wait_route_names(namesrv: str, topic: str, broker_names: set[str]) -> None:
    deadline = time.monotonic() + ROUTE_TIMEOUT_S
    while True:
        route = route_of(namesrv, topic)
        names = {data["brokerName"] for data in (route or {}).get("queueDatas", [])}
        if names == broker_names:
            return
        assert time.monotonic() < deadline, f"route of {topic}: {route}"
        time.sleep(0.2)


def _stored_count(notifier_url: str, topic: str) -> int:
    """Messages `topic` holds in this group's store: the sum of its queues' max offsets."""
    with urllib.request.urlopen(f"{notifier_url}/v1/topics/{topic}/queues",
                                timeout=10) as response:
        queues = json.loads(response.read())["queues"]
    return sum(int(queue["max_offset"]) - int(queue["min_offset"]) for queue in queues)


def _logs(tmp_path: Path) -> str:
    return (f"--- stdout ---\n{(tmp_path / 'up.out').read_text()}\n--- stderr (end) ---\n"
            f"{(tmp_path / 'up.err').read_text(errors='replace')[-3000:]}")


def test_mqadmin_sees_the_cluster_and_a_consumer_across_both_groups(tmp_path: Path) -> None:
    """Apache RocketMQ's mqadmin (5.5.0) against `up --groups 2` through the name server:
    `updateTopic -c` makes the topic on both groups, RocketMQ's Java client produces and
    consumes through it, `clusterList` lists both brokers, `topicRoute` both groups' queues
    and `consumerProgress` the group's queues on both, nothing left to consume."""
    clients = JavaClients.build(CLIENT_5)
    admin = MqAdmin(clients)
    with _up_groups(tmp_path) as (namesrv, _groups):
        def run(command: str, *args: str) -> AdminResult:
            result = admin.run(command, namesrv, *args)
            assert not result.failed, result.output
            return result

        topic, group = f"adm-{uuid.uuid4().hex[:10]}", f"adm-g-{uuid.uuid4().hex[:10]}"
        run("updateTopic", "-c", "DefaultCluster", "-t", topic,
            "-r", str(QUEUE_COUNT_PER_GROUP), "-w", str(QUEUE_COUNT_PER_GROUP))
        _wait_route_names(namesrv, topic, {"mqstore-g0", "mqstore-g1"})
        sent = clients.run("push-concurrently", namesrv=namesrv, topic=topic, group=group,
                           count=MESSAGE_COUNT)
        assert sent["ok"], sent
        brokers = {row[1] for row in run("clusterList").table()}
        assert brokers == {"mqstore-g0", "mqstore-g1"}, brokers
        route = run("topicRoute", "-t", topic).output
        assert route.count('"brokerName":"mqstore-g') >= 2 * GROUP_COUNT, route
        progress = run("consumerProgress", "-g", group, "-t", topic)
        rows = [row for row in progress.table() if row and row[0] == topic]
        assert {row[1] for row in rows} == {"mqstore-g0", "mqstore-g1"}, progress.output
        assert len(rows) == GROUP_COUNT * QUEUE_COUNT_PER_GROUP, progress.output
        assert progress.field("Consume Diff Total") == "0", progress.output


LOAD_RATE_PER_S = 200
LOAD_THREADS = 8
LOAD_ACKS_BETWEEN = 600
"""Acknowledgements before the kill and after the restart: 3 s at the rate."""
LOAD_TIMEOUT_S = 60.0


def test_a_group_front_killed_under_load_loses_nothing_the_client_retries_elsewhere(
        tmp_path: Path) -> None:
    """RocketMQ's Java producer (its default retry: 2 more tries within 3,000 ms, each to
    another group) at 200 msg/s and a push consumer, while group 0's remoting front is
    killed with SIGKILL and `up` restarts it: no send fails, every acknowledged message is
    received, and group 0 takes sends again after its restart."""
    clients = JavaClients.build(CLIENT_5)
    with _up_groups(tmp_path) as (namesrv, groups):
        started = time.monotonic()
        load = LoadRun.start(clients, namesrv=namesrv, topic=f"load-{uuid.uuid4().hex[:10]}",
                             work_dir=tmp_path / "load", rate_per_s=LOAD_RATE_PER_S,
                             threads=LOAD_THREADS)
        try:
            before = load.wait_acked(LOAD_ACKS_BETWEEN, timeout_s=LOAD_TIMEOUT_S)
            assert before["ackedByBroker"].get("mqstore-g0", 0) > 0, before
            os.kill(_listener_pid(groups[0]["remoting"]), signal.SIGKILL)
            killed = load.progress()["ackedByBroker"].get("mqstore-g0", 0)
            load.wait_until("group 0 acknowledging again", lambda progress: progress.get(
                "ackedByBroker", {}).get("mqstore-g0", 0) >= killed + LOAD_ACKS_BETWEEN // 4,
                timeout_s=LOAD_TIMEOUT_S)
            report = load.stop()
        finally:
            load.kill()
    print(f"\nload through a killed front: {summary(report, started)}")
    assert_nothing_lost(report)
    assert report["failed"] == 0, report
    assert set(report["ackedByBroker"]) == {"mqstore-g0", "mqstore-g1"}, report


def _listener_pid(port: int) -> int:
    """The process listening on 127.0.0.1:`port` (`ss -ltnp`)."""
    listing = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True,
                             text=True, check=True).stdout
    found = re.search(r"pid=(\d+)", listing)
    assert found, f"nothing listens on {port}: {listing!r}"
    return int(found.group(1))
