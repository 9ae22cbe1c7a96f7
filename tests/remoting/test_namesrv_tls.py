"""`remoting.namesrv_tls_enabled`: the registrar (services/notifier/remoting/registrar.py)
registers with a TLS name server (`mqstore namesrv --tls-cert-file`) and a new group copies
the cluster's topics over the same links; a name server whose certificate does not verify
is a counted, logged failure; the link checks the certificate against the configured name,
not the address it connects to; TLS without a `tls` section is refused at start."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
import yaml

from mqstore.services.common.links.framing import FrameLimits, FrameWatchdog
from mqstore.services.common.settings.config_file import load_config
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.common.settings.tls import TlsSettings, client_context
from mqstore.services.namesrv import handlers
from mqstore.services.namesrv.run import build
from mqstore.services.namesrv.server import NamesrvServer
from mqstore.services.namesrv.settings import NamesrvSettings
from mqstore.services.notifier.remoting.codes import GET_BROKER_CLUSTER_INFO, SUCCESS
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.namesrv_link import NamesrvLink
from mqstore.services.notifier.remoting.registrar import BrokerRegistrar
from mqstore.storage import ConfigError
from tests.namesrv.test_server import register_body, register_header
from tests.remoting.client import RemotingClient
from tests.remoting.fronts import front_over
from tests.remoting.test_registrar import FAST, until
from tests.services.tls_certificates import Certificate, self_signed


async def tls_namesrv(certificate: Certificate) -> tuple[NamesrvServer, int]:
    server = build(NamesrvSettings(port=0, tls_cert_file=str(certificate.cert_file),
                                   tls_key_file=str(certificate.key_file)))
    return server, await server.start()


def tls_of(certificate: Certificate, *, ca: Certificate | None = None) -> TlsSettings:
    """The `tls` section serving `certificate`, trusting `ca` (default: itself)."""
    return TlsSettings(cert_file=str(certificate.cert_file),
                       key_file=str(certificate.key_file),
                       ca_file=str((ca or certificate).cert_file))


def test_a_broker_registers_over_tls_and_its_topics_are_routed(tmp_path: Path) -> None:
    asyncio.run(_a_broker_registers_over_tls_and_its_topics_are_routed(tmp_path))


async def _a_broker_registers_over_tls_and_its_topics_are_routed(tmp_path: Path) -> None:
    """A group `ga` already holds Orders; the new group's front registers over TLS through
    the name `localhost`, takes Orders over the same link, and both are routed."""
    certificate = self_signed(tmp_path / "tls")
    namesrv, port = await tls_namesrv(certificate)
    other = await RemotingClient.connect(f"127.0.0.1:{port}",
                                         ssl_context=certificate.client_context())
    settings = RemotingSettings(port=0, namesrv_addresses=f"localhost:{port}",
                                namesrv_tls_enabled=True, **FAST)
    try:
        registered = await other.request(handlers.REGISTER_BROKER,
                                         register_header("ga", "h:1"), register_body("Orders"))
        assert registered.code == SUCCESS
        tls = tls_of(certificate)
        with front_over(tmp_path / "store", settings=settings, tls=tls) as front:
            registrar = BrokerRegistrar(front, tls=tls)
            registrar.start()
            address = f"127.0.0.1:{port}"
            await until("registered over TLS",
                        lambda: registrar.counts[(address, "success")] >= 1)
            await until("Orders copied and routed to this group too", lambda: {
                data["brokerName"] for data in
                (namesrv.namesrv.routes.route("Orders") or {}).get("brokerDatas", [])}
                == {"ga", "mqstore"})
            route = namesrv.namesrv.routes.route("TBW102")
            assert route is not None
            assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:9876"}
            await registrar.close()
            assert {data["brokerName"] for data in
                    namesrv.namesrv.routes.route("Orders")["brokerDatas"]} == {"ga"}, \
                "unregistered over TLS"
    finally:
        await other.close()
        await namesrv.close()


def test_a_name_server_the_ca_does_not_verify_is_a_counted_failure(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    asyncio.run(_a_name_server_the_ca_does_not_verify_is_a_counted_failure(tmp_path, caplog))


async def _a_name_server_the_ca_does_not_verify_is_a_counted_failure(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    served = self_signed(tmp_path / "served")
    trusted = self_signed(tmp_path / "trusted")
    namesrv, port = await tls_namesrv(served)
    address = f"127.0.0.1:{port}"
    settings = RemotingSettings(port=0, namesrv_addresses=address, namesrv_tls_enabled=True,
                                **FAST)
    try:
        tls = tls_of(served, ca=trusted)
        with caplog.at_level(logging.WARNING, logger="mqstore.remoting"), \
                front_over(tmp_path / "store", settings=settings, tls=tls) as front:
            registrar = BrokerRegistrar(front, tls=tls)
            registrar.start()
            await until("two failed rounds",
                        lambda: registrar.counts[(address, "unreachable")] >= 2)
            assert registrar.counts[(address, "success")] == 0
            assert namesrv.namesrv.routes.route("TBW102") is None
            await registrar.close()
        assert any("CERTIFICATE_VERIFY_FAILED" in record.getMessage()
                   for record in caplog.records), [r.getMessage() for r in caplog.records]
    finally:
        await namesrv.close()


def test_the_link_checks_the_configured_name_not_the_address(tmp_path: Path) -> None:
    asyncio.run(_the_link_checks_the_configured_name_not_the_address(tmp_path))


async def _the_link_checks_the_configured_name_not_the_address(tmp_path: Path) -> None:
    """The certificate names `localhost` and 127.0.0.1; a link to 127.0.0.1 verifying the
    name `localhost` connects, one verifying another name does not."""
    certificate = self_signed(tmp_path / "tls")
    namesrv, port = await tls_namesrv(certificate)
    context = client_context(tls_of(certificate), host="namesrv.example")
    assert context is not None and context.check_hostname
    watchdog = FrameWatchdog(FrameLimits(
        frame_size_bytes_max=1 << 20, frame_read_timeout_ms=1000,
        write_buffer_bytes_max=1 << 20, write_drain_timeout_ms=1000))
    try:
        for name, verified in (("localhost", True), ("namesrv.example", False)):
            link = NamesrvLink("127.0.0.1", port, watchdog=watchdog, ssl_context=context,
                               server_hostname=name)
            try:
                answer = await link.call(Command(GET_BROKER_CLUSTER_INFO, link.next_opaque()))
                assert verified and answer.code == SUCCESS, name
            except OSError as error:
                assert not verified, f"{name}: {error!r}"
                assert "Hostname mismatch" in str(error) or "doesn't match" in str(error), \
                    repr(error)
            finally:
                link.close()
    finally:
        await watchdog.stop()
        await namesrv.close()


def test_tls_to_name_servers_without_a_tls_section_is_refused(tmp_path: Path) -> None:
    settings = RemotingSettings(port=0, namesrv_addresses="127.0.0.1:9876",
                                namesrv_tls_enabled=True)
    with pytest.raises(ConfigError, match="namesrv_tls_enabled needs the tls section"), \
            front_over(tmp_path / "store", settings=settings):
        pass
    config = tmp_path / "mqstore.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data"), "remoting": {
        "namesrv_addresses": "ns:9876", "namesrv_tls_enabled": True}}))
    with pytest.raises(ConfigError, match=r"remoting\.namesrv_tls_enabled needs the tls "
                                          r"section \(tls\.cert_file"):
        load_config(config)
