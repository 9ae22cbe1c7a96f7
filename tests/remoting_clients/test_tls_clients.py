"""TLS on every listener a RocketMQ application uses: Apache RocketMQ's Java client 5.5.0 with
`-Dtls.enable=true` (its `ClientConfig.useTLS` defaults to `TlsSystemConfig.tlsEnable`; with
`tls.client.authServer=false`, its default, it does not verify the server's certificate),
given only the address of `mqstore namesrv --tls-cert-file C --tls-key-file K`, produces and
consumes every message once through an `mqstore up` broker serving the same certificate
(a `tls` section) and registered with that name server over TLS
(`remoting.namesrv_tls_enabled`). The same client without TLS gets no route and sends
nothing: the name server closes its plaintext connection.

The same tests run against Apache RocketMQ 5.5.0 (`RocketMqPeer.start(tls=True)`: name
server and broker with `tls.server.mode=enforcing` and RocketMQ's own test certificate,
the broker registering over TLS), which shows the client and the expectations right: the
refusal a plaintext client sees there is the one it sees from mqstore.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.processes import MQSTORE
from tests.remoting.up_process import mqstore_up
from tests.remoting_clients.java_clients import (
    CLIENT_5,
    JVM_OPTIONS,
    JavaClients,
    assert_every_message_once,
)
from tests.remoting_clients.rocketmq_peer import RocketMqPeer, free_port
from tests.services.tls_certificates import self_signed

pytestmark = pytest.mark.remoting_clients

COUNT = 40
START_TIMEOUT_S = 30.0
ROUTE_TIMEOUT_S = 60.0
BROKER_NAME = "broker-tls"
CLUSTER_NAME = "TlsCluster"
TLS_ON = (*JVM_OPTIONS, "-Dtls.enable=true")
TLS_OFF = (*JVM_OPTIONS, "-Dtls.enable=false")
TARGETS = ("rocketmq", "mqstore")
"""As conftest.py's: the reference first, so a failure against mqstore alone is mqstore's."""


@pytest.fixture(scope="module")
def mqstore_tls_namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A TLS `mqstore namesrv` and a TLS `mqstore up` registered with it: the name server."""
    root = tmp_path_factory.mktemp("tls-clients")
    certificate = self_signed(root / "tls")
    port = free_port()
    address = f"127.0.0.1:{port}"
    log_path = root / "namesrv.out"
    with open(log_path, "wb") as output:
        namesrv = subprocess.Popen([*MQSTORE, "namesrv", "--port", str(port),
                                    "--tls-cert-file", str(certificate.cert_file),
                                    "--tls-key-file", str(certificate.key_file),
                                    "--log-level", "WARNING"],
                                   stdout=output, stderr=subprocess.STDOUT)
    config = root / "mqstore.yaml"
    config.write_text(yaml.safe_dump({"tls": certificate.tls_section(), "remoting": {
        "namesrv_addresses": address, "namesrv_tls_enabled": True,
        "register_interval_ms": 3000, "broker_name": BROKER_NAME,
        "cluster_name": CLUSTER_NAME}}))
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while f"listening on {address}" not in log_path.read_text(errors="replace"):
            assert namesrv.poll() is None, log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.1)
        (root / "broker").mkdir()
        with mqstore_up(root / "broker", config=config):
            yield address
    finally:
        namesrv.terminate()
        namesrv.wait(timeout=START_TIMEOUT_S)


@pytest.fixture(scope="module")
def rocketmq_tls_namesrv() -> Iterator[str]:
    """Apache RocketMQ 5.5.0's name server and broker serving only TLS: the name server."""
    with RocketMqPeer.start(tls=True) as peer:
        yield peer.namesrv


@pytest.fixture(scope="module", params=TARGETS)
def tls_namesrv(request: pytest.FixtureRequest) -> str:
    """The TLS name server of each target, a TLS broker registered with it."""
    address: str = request.getfixturevalue(f"{request.param}_tls_namesrv")
    return address


@pytest.fixture(scope="module")
def java_clients() -> JavaClients:
    return JavaClients.build(CLIENT_5)


def new_topic() -> str:
    return f"tls-{uuid.uuid4().hex[:10]}"


def wait_for_route(clients: JavaClients, namesrv: str) -> dict[str, Any]:
    """Until the broker's registration (over TLS) gives a TLS client TBW102's route: the
    `refused` scenario's verdict with TLS on."""
    deadline = time.monotonic() + ROUTE_TIMEOUT_S
    while True:
        result = clients.run("refused", namesrv=namesrv, topic="TBW102", jvm_options=TLS_ON)
        if result["producerRoute"]["ok"]:
            return result
        assert time.monotonic() < deadline, result
        time.sleep(1.0)


def test_a_tls_client_produces_and_consumes_through_the_tls_name_server(
        tls_namesrv: str, java_clients: JavaClients) -> None:
    """The route comes from the TLS name server, the sends and pulls go to the TLS broker."""
    wait_for_route(java_clients, tls_namesrv)
    result = java_clients.run("produce", namesrv=tls_namesrv, topic=new_topic(), mode="sync",
                              count=COUNT, jvm_options=TLS_ON)
    assert_every_message_once(result, count=COUNT)
    result = java_clients.run("push-concurrently", namesrv=tls_namesrv, topic=new_topic(),
                              count=COUNT, jvm_options=TLS_ON)
    assert_every_message_once(result, count=COUNT)


def test_the_same_client_without_tls_is_refused(tls_namesrv: str,
                                                java_clients: JavaClients) -> None:
    """With TLS on, the `refused` scenario's route lookups succeed; with TLS off, its send
    and both route lookups fail at the name server (RemotingSendRequestException: it
    closed the plaintext connection), so the client never learns the broker's address."""
    with_tls = wait_for_route(java_clients, tls_namesrv)
    assert with_tls["consumerRoute"]["ok"] is True, with_tls
    result = java_clients.run("refused", namesrv=tls_namesrv, topic="TBW102",
                              jvm_options=TLS_OFF)
    refusal = f"send request to </{tls_namesrv}> failed"
    for call in ("send", "producerRoute", "consumerRoute"):
        assert result[call]["ok"] is False, result
        assert any(error["message"] == refusal for error in result[call]["errors"]), result
