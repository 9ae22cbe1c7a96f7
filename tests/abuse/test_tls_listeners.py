"""TLS on every listener (issue 17, Deliver 2): with a `tls` section, `mqstore up` serves a
TLS client on each listener type and refuses a plaintext one at its first bytes.

    writer, indexer, notifier HTTP   GET /healthz
    notifier's remoting front        GET_BROKER_CLUSTER_INFO (a RocketMQ client with useTLS)
    writer's replication listener    the master's hello (then the secret handshake)

The notifier's notice stream from the indexer runs over TLS too (it verifies the chain
against `ca_file`); the writer's forward listener stays plaintext on loopback.
On the code before TLS, the HTTPS requests failed and the plaintext ones were answered."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

from mqstore.services.cli.up import Supervisor, UpOptions
from mqstore.services.common.links.mutual_proof import HELLO
from mqstore.services.writer.replication_handshake import REPLICATION
from mqstore.services.writer.replication_protocol import encode_report
from tests.abuse.transport_sockets import listening_addresses
from tests.integration.three_services import free_ports
from tests.remoting_clients.raw_remoting import GET_BROKER_CLUSTER_INFO, encode_request
from tests.services.tls_certificates import Certificate, self_signed

TIMEOUT_S = 30.0
HTTP_SERVICES = ("writer", "indexer", "notifier")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, int],
                                                                         Certificate]]:
    """`mqstore up --config` with a `tls` section; yields every port, replication included."""
    root = tmp_path_factory.mktemp("tls")
    certificate = self_signed(root / "tls")
    config = root / "mqstore.yaml"
    config.write_text(yaml.safe_dump({"tls": certificate.tls_section()}))
    ports = free_ports((*HTTP_SERVICES, "remoting", "forward"))
    (root / "data").mkdir()
    supervisor = Supervisor(UpOptions(data_dir=root / "data", ports=ports, config=config),
                            say=lambda line: None)
    try:
        supervisor.start()
        writer = supervisor._children["writer"].process.pid
        known = {ports["writer"], ports["forward"]}
        (replication,) = [int(address.rpartition(":")[2])
                          for address in listening_addresses(writer)
                          if int(address.rpartition(":")[2]) not in known]
        yield {**ports, "replication": replication}, certificate
    finally:
        supervisor.stop()


def plaintext_answer(port: int, data: bytes) -> bytes:
    """Everything the listener sends a plaintext client that says `data`, until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as connection:
        connection.sendall(data)
        chunks = []
        with contextlib.suppress(ConnectionResetError):
            while chunk := connection.recv(1 << 16):
                chunks.append(chunk)
    return b"".join(chunks)


@contextlib.contextmanager
def tls_connection(port: int, context: ssl.SSLContext) -> Iterator[ssl.SSLSocket]:
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as connection:
        yield connection


def read_exactly(connection: ssl.SSLSocket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        assert chunk, "closed early"
        data += chunk
    return data


@pytest.mark.parametrize("service", HTTP_SERVICES)
def test_http_listeners_serve_tls_and_refuse_plaintext(
        served: tuple[dict[str, int], Certificate], service: str) -> None:
    ports, certificate = served
    url = f"https://127.0.0.1:{ports[service]}/healthz"
    with urllib.request.urlopen(url, timeout=TIMEOUT_S,
                                context=certificate.client_context()) as answer:
        assert answer.status == 200
    answer_bytes = plaintext_answer(ports[service],
                                    b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert not answer_bytes.startswith(b"HTTP/")
    with pytest.raises((urllib.error.URLError, ssl.SSLError)):  # an unknown certificate
        urllib.request.urlopen(url, timeout=TIMEOUT_S, context=ssl.create_default_context())


def test_the_notice_stream_runs_over_tls(served: tuple[dict[str, int], Certificate]) -> None:
    ports, certificate = served
    url = f"https://127.0.0.1:{ports['notifier']}/metrics"
    for _ in range(600):
        with urllib.request.urlopen(url, timeout=TIMEOUT_S,
                                    context=certificate.client_context()) as answer:
            if b"mqstore_notice_stream_connected 1.0" in answer.read():
                return
        time.sleep(0.05)
    raise AssertionError("the notifier never connected to the indexer's TLS stream")


def test_the_remoting_front_serves_tls_and_refuses_plaintext(
        served: tuple[dict[str, int], Certificate]) -> None:
    ports, certificate = served
    request = encode_request(GET_BROKER_CLUSTER_INFO, 7)
    with tls_connection(ports["remoting"], certificate.client_context()) as connection:
        connection.sendall(request)
        length, mark = struct.unpack(">II", read_exactly(connection, 8))
        header = json.loads(read_exactly(connection, length - 4)[:mark & 0xFFFFFF])
    assert (header["opaque"], header["flag"] & 1) == (7, 1)  # the answer to our request
    assert b"opaque" not in plaintext_answer(ports["remoting"], request)


def test_the_replication_listener_serves_tls_and_refuses_plaintext(
        served: tuple[dict[str, int], Certificate]) -> None:
    ports, certificate = served
    with tls_connection(ports["replication"], certificate.client_context()) as connection:
        hello = read_exactly(connection, HELLO.size)
    assert hello.startswith(REPLICATION.magic)
    assert REPLICATION.magic not in plaintext_answer(ports["replication"], encode_report(0))
