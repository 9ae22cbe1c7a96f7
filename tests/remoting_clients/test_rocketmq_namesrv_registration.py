"""mqstore's broker registers with Apache RocketMQ 5.5.0's name server
(services/notifier/remoting/registrar.py), and RocketMQ's Java client 5.5.0, given only that
name server, produces to and consumes from mqstore.

RocketMQ's name server runs alone from the jars the peer harness builds (rocketmq_peer.py):
no RocketMQ broker runs.  `mqstore up` registers with it (`remoting.namesrv_addresses`).  A
topic the producer sends to does not exist: the client routes it by TBW102 (which mqstore
registered), the front creates it, registers again, and the read-back finds its route; a
push consumer then gets every message of another topic.  A clean stop of mqstore
unregisters it.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.remoting.up_process import mqstore_up
from tests.remoting_clients.java_clients import CLIENT_5, JavaClients, assert_every_message_once
from tests.remoting_clients.maven_build import build
from tests.remoting_clients.raw_remoting import route_of
from tests.remoting_clients.rocketmq_peer import (
    AUTO_CREATE_TEMPLATE_TOPIC,
    DIE_WITH_PARENT,
    JVM_OPTIONS,
    NAMESRV_HEAP,
    PEER_PROJECT,
    ROCKETMQ_PEER_VERSION,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    free_port,
)

pytestmark = pytest.mark.remoting_clients

COUNT = 60
ROUTE_TIMEOUT_S = 60.0
REGISTRATION_SETTINGS = {"MQSTORE_REMOTING__REGISTER_INTERVAL_MS": "2000",
                         "MQSTORE_REMOTING__REGISTER_TIMEOUT_MS": "2000",
                         "MQSTORE_REMOTING__REGISTER_TOPICS_CHECK_INTERVAL_MS": "200"}


@contextlib.contextmanager
def rocketmq_namesrv() -> Iterator[str]:
    """Apache RocketMQ 5.5.0's name server alone, on a free loopback port."""
    jars = build(PEER_PROJECT, ROCKETMQ_PEER_VERSION,
                 required_jar=f"rocketmq-broker-{ROCKETMQ_PEER_VERSION}.jar")
    directory = Path(tempfile.mkdtemp(prefix="rocketmq-namesrv-"))
    port = free_port()
    (directory / "namesrv.conf").write_text(f"listenPort={port}\nbindAddress=127.0.0.1\n")
    log_path = directory / "namesrv.out"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*DIE_WITH_PARENT, jars.java, *JVM_OPTIONS, NAMESRV_HEAP,
             f"-Duser.home={directory}", f"-Drocketmq.home.dir={directory}", "-cp",
             jars.classpath, "org.apache.rocketmq.namesrv.NamesrvStartup", "-c",
             str(directory / "namesrv.conf")],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=directory)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "boot success" not in log_path.read_text(errors="replace"):
            assert process.poll() is None, log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "RocketMQ's name server did not boot"
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(directory, ignore_errors=True)


def wait_for_route(namesrv: str, topic: str) -> dict[str, Any]:
    deadline = time.monotonic() + ROUTE_TIMEOUT_S
    while (route := route_of(namesrv, topic)) is None:
        assert time.monotonic() < deadline, f"no route of {topic} in {ROUTE_TIMEOUT_S} s"
        time.sleep(0.2)
    return route


def test_java_client_routed_by_rocketmq_namesrv_to_mqstore(tmp_path: Path) -> None:
    clients = JavaClients.build(CLIENT_5)
    with rocketmq_namesrv() as namesrv:
        settings = {**REGISTRATION_SETTINGS, "MQSTORE_REMOTING__NAMESRV_ADDRESSES": namesrv}
        with mqstore_up(tmp_path, settings=settings) as ports:
            front = f"127.0.0.1:{ports['remoting']}"
            route = wait_for_route(namesrv, AUTO_CREATE_TEMPLATE_TOPIC)
            assert [data["brokerAddrs"] for data in route["brokerDatas"]] == [{"0": front}]
            assert [data["brokerName"] for data in route["brokerDatas"]] == ["mqstore"]

            topic = f"rocketmq-ns-{uuid.uuid4().hex[:10]}"
            assert_every_message_once(clients.run("produce", namesrv=namesrv, topic=topic,
                                                  mode="sync", count=COUNT), count=COUNT)
            route = wait_for_route(namesrv, topic)
            assert [data["brokerAddrs"] for data in route["brokerDatas"]] == [{"0": front}]
            # a push consumer: its group's %RETRY% topic is routed by the name server too
            assert_every_message_once(clients.run("push-concurrently", namesrv=namesrv,
                                                  topic=f"{topic}-push", count=COUNT),
                                      count=COUNT)
        deadline = time.monotonic() + ROUTE_TIMEOUT_S
        while route_of(namesrv, AUTO_CREATE_TEMPLATE_TOPIC) is not None:
            assert time.monotonic() < deadline, "mqstore's broker is still routed after stop"
            time.sleep(0.2)
    assert "unregistered from name server" in (tmp_path / "up.log").read_text()
