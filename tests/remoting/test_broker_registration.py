"""`mqstore up` with `remoting.namesrv_addresses` registers with `mqstore namesrv`
(services/notifier/remoting/registrar.py), all on loopback ports the OS picked.

One broker's life, as the name server sees it: its first registration routes TBW102 and the
reply topic to the front's address; a topic created on the front is routed within a round;
a notifier that hangs (SIGSTOP: its connection stays open, nothing more is sent) expires
after the name server's `--broker-expiry-ms`, and registers again when it resumes; a clean
stop unregisters it at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.processes import MQSTORE
from tests.remoting.up_process import mqstore_up
from tests.remoting_clients.raw_remoting import SUCCESS, request, route_of
from tests.remoting_clients.rocketmq_peer import free_port

UPDATE_AND_CREATE_TOPIC = 17
EXPIRY_MS = 3_000
WAIT_S = 30.0
REGISTRATION_SETTINGS = {"MQSTORE_REMOTING__REGISTER_INTERVAL_MS": "1000",
                         "MQSTORE_REMOTING__REGISTER_TIMEOUT_MS": "1000",
                         "MQSTORE_REMOTING__REGISTER_TOPICS_CHECK_INTERVAL_MS": "200"}


@pytest.fixture()
def name_server() -> Iterator[str]:
    """`mqstore namesrv` with a 3 s broker expiry, scanned every 0.5 s."""
    port = free_port()
    process = subprocess.Popen([*MQSTORE, "namesrv", "--port", str(port),
                                "--broker-expiry-ms", str(EXPIRY_MS),
                                "--expiry-scan-interval-ms", "500", "--log-level", "WARNING"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert f"listening on 127.0.0.1:{port}" in line, line
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_until(what: str, check: Any) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (found := check()):
        assert time.monotonic() < deadline, f"not within {WAIT_S} s: {what}"
        time.sleep(0.1)
    return found


def notifier_pid(remoting_port: int) -> int:
    """The `mqstore notifier` child of `mqstore up` serving `remoting_port`."""
    marker = f"MQSTORE_REMOTING__PORT={remoting_port}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"notifier" in command and marker in environment:
            return int(entry.name)
    raise AssertionError(f"no notifier serves remoting port {remoting_port}")


def test_register_reregister_expire_unregister(tmp_path: Path, name_server: str) -> None:
    settings = {**REGISTRATION_SETTINGS, "MQSTORE_REMOTING__NAMESRV_ADDRESSES": name_server}
    with mqstore_up(tmp_path, settings=settings) as ports:
        front = f"127.0.0.1:{ports['remoting']}"
        route = wait_until("TBW102 routed", lambda: route_of(name_server, "TBW102"))
        assert route["brokerDatas"] == [{"brokerAddrs": {"0": front}, "brokerName": "mqstore",
                                         "cluster": "DefaultCluster",
                                         "enableActingMaster": False}], route
        assert route_of(name_server, "DefaultCluster_REPLY_TOPIC") is not None

        created = request(front, UPDATE_AND_CREATE_TOPIC, ext_fields={
            "topic": "registered-topic", "readQueueNums": "3", "writeQueueNums": "3",
            "perm": "6"})
        assert created.header["code"] == SUCCESS, created.header
        route = wait_until("the new topic routed",
                           lambda: route_of(name_server, "registered-topic"))
        assert route["queueDatas"] == [{"brokerName": "mqstore", "perm": 6,
                                        "readQueueNums": 3, "topicSysFlag": 0,
                                        "writeQueueNums": 3}], route

        pid = notifier_pid(ports["remoting"])
        os.kill(pid, signal.SIGSTOP)
        try:
            stopped_s = time.monotonic()
            wait_until("the hung broker expired",
                       lambda: route_of(name_server, "registered-topic") is None)
            assert time.monotonic() - stopped_s >= EXPIRY_MS / 1000 - 1.5
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_until("registered again once resumed",
                   lambda: route_of(name_server, "registered-topic"))
    assert route_of(name_server, "TBW102") is None, "a clean stop unregisters"
    assert "unregistered from name server" in (tmp_path / "up.log").read_text()
