"""`mqstore namesrv --tls-cert-file --tls-key-file` (services/namesrv/): both listeners
answer a TLS client and close a plaintext one at its first bytes; the options are checked
at start, each refusal one line and exit 2."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from mqstore.services.namesrv import handlers
from mqstore.services.namesrv.run import build
from mqstore.services.namesrv.settings import NamesrvConfigError, NamesrvSettings
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.frame import Command, encode
from tests.namesrv.test_server import register_body, register_header
from tests.processes import MQSTORE
from tests.remoting.client import RemotingClient
from tests.remoting_clients.rocketmq_peer import free_port
from tests.services.tls_certificates import Certificate, self_signed

TIMEOUT_S = 10.0


def tls_settings(certificate: Certificate, **fields: int) -> NamesrvSettings:
    return NamesrvSettings(port=0, tls_cert_file=str(certificate.cert_file),
                           tls_key_file=str(certificate.key_file), **fields)


async def plaintext_answer(address: str) -> bytes:
    """What a listener sends a plaintext client that asks for the cluster info, until it
    closes the connection."""
    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.writelines(encode(Command(codes.GET_BROKER_CLUSTER_INFO, 1)))
        async with asyncio.timeout(TIMEOUT_S):
            try:
                return await reader.read()
            except ConnectionResetError:
                return b""
    finally:
        writer.close()


async def _served_over_tls(address: str, certificate: Certificate) -> None:
    """A broker registers over TLS; a client's route and cluster info name it."""
    broker = await RemotingClient.connect(address, ssl_context=certificate.client_context())
    client = await RemotingClient.connect(address, ssl_context=certificate.client_context())
    try:
        registered = await broker.request(handlers.REGISTER_BROKER,
                                          register_header("a", "h:1"), register_body("t"))
        assert registered.code == codes.SUCCESS
        route = await client.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "t"},
                                     timeout_s=TIMEOUT_S)
        assert route.code == codes.SUCCESS
        assert json.loads(route.body)["brokerDatas"][0]["brokerAddrs"] == {"0": "h:1"}
        info = await client.request(codes.GET_BROKER_CLUSTER_INFO, timeout_s=TIMEOUT_S)
        assert json.loads(info.body)["clusterAddrTable"] == {"DefaultCluster": ["a"]}
    finally:
        await client.close()
        await broker.close()


def test_both_listeners_answer_tls_and_close_plaintext(tmp_path: Path) -> None:
    certificate = self_signed(tmp_path / "tls")

    async def run() -> None:
        server = build(tls_settings(certificate, external_port=free_port()))
        port = await server.start()
        try:
            for address in (f"127.0.0.1:{port}", f"127.0.0.1:{server.external_port}"):
                await _served_over_tls(address, certificate)
                assert await plaintext_answer(address) == b"", address
        finally:
            await server.close()

    asyncio.run(run())


def test_half_of_the_tls_options_is_refused() -> None:
    with pytest.raises(NamesrvConfigError, match=r"tls_cert_file='c\.pem' and tls_key_file=''"):
        NamesrvSettings(tls_cert_file="c.pem")
    with pytest.raises(NamesrvConfigError, match="must be set together"):
        NamesrvSettings(tls_key_file="k.pem")


def test_a_file_that_cannot_be_loaded_is_refused_at_build(tmp_path: Path) -> None:
    with pytest.raises(NamesrvConfigError, match="cannot load tls_cert_file"):
        build(NamesrvSettings(tls_cert_file=str(tmp_path / "missing.crt"),
                              tls_key_file=str(tmp_path / "missing.key")))


@pytest.mark.parametrize(("options", "refusal"), [
    (["--tls-cert-file", "c.pem"], "must be set together"),
    (["--tls-key-file", "k.pem"], "must be set together"),
    (["--tls-cert-file", "missing.crt", "--tls-key-file", "missing.key"],
     "cannot load tls_cert_file='missing.crt'"),
])
def test_the_command_refuses_in_one_line(tmp_path: Path, options: list[str],
                                         refusal: str) -> None:
    done = subprocess.run([*MQSTORE, "namesrv", "--port", "0", *options], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert refusal in done.stderr, done.stderr
