"""The `tls` section: its checks, the contexts it makes, and a follower copying its master's
log over TLS with the replication secret (the two together: private and authenticated)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from mqstore.services.common.settings.config_file import load_config
from mqstore.services.common.settings.replication import ReplicationSettings
from mqstore.services.common.settings.tls import TlsSettings, client_context, server_context
from mqstore.services.writer.replication_follower import ReplicationClient
from mqstore.services.writer.replication_master import ReplicationServer
from mqstore.storage import BrokerRole, ConfigError, Message, MessageStore
from tests.conftest import small_config
from tests.services.serving import run
from tests.services.tls_certificates import self_signed


def test_cert_and_key_go_together_and_bad_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be set together"):
        TlsSettings(cert_file="a.crt")
    with pytest.raises(ConfigError, match="without cert_file"):
        TlsSettings(ca_file="ca.crt")
    assert server_context(TlsSettings()) is None
    assert client_context(TlsSettings(), host="10.0.0.1") is None
    (tmp_path / "bad.crt").write_text("not a certificate")
    with pytest.raises(ConfigError, match=r"bad\.crt"):
        server_context(TlsSettings(cert_file=str(tmp_path / "bad.crt"),
                                   key_file=str(tmp_path / "bad.crt")))


def test_links_check_host_names_except_on_loopback(tmp_path: Path) -> None:
    certificate = self_signed(tmp_path)
    settings = TlsSettings(**certificate.tls_section())
    remote = client_context(settings, host="broker-0.broker-headless.ns.svc")
    local = client_context(settings, host="127.0.0.1")
    assert remote is not None and local is not None
    assert remote.check_hostname
    assert not local.check_hostname


def test_the_config_file_and_environment_carry_the_tls_section(tmp_path: Path) -> None:
    config = load_config(None, environ={"MQSTORE_DATA_DIR": str(tmp_path),
                                        "MQSTORE_TLS__CERT_FILE": "/etc/mqstore/tls/tls.crt",
                                        "MQSTORE_TLS__KEY_FILE": "/etc/mqstore/tls/tls.key"})
    assert config.tls.enabled


@pytest.mark.parametrize("follower_tls", [True, False])
def test_a_follower_copies_its_master_over_tls_and_a_plaintext_one_cannot(
        tmp_path: Path, follower_tls: bool) -> None:
    certificate = self_signed(tmp_path / "tls")
    tls = TlsSettings(**certificate.tls_section())
    secret = tmp_path / "secret"
    secret.write_text("0123456789abcdef0123456789abcdef\n")
    fast = {"heartbeat_interval_ms": 100, "housekeeping_interval_ms": 400,
            "reconnect_interval_ms": 50, "secret_file": str(secret)}
    server = ReplicationServer(ReplicationSettings(host="127.0.0.1", **fast),  # type: ignore[arg-type]
                               ssl_context=server_context(tls))
    master = MessageStore.open(tmp_path / "m", small_config(), on_readable=server.notify)
    for index in range(50):
        master.put(Message("T", 0, b"over tls %d" % index))
    follower = MessageStore.open(tmp_path / "f", small_config(role=BrokerRole.FOLLOWER))

    async def scenario() -> tuple[int, str | None]:
        await server.start(master)
        client = ReplicationClient(
            follower, ReplicationSettings(master=f"127.0.0.1:{server.port}", **fast),  # type: ignore[arg-type]
            ssl_context=client_context(tls, host="127.0.0.1") if follower_tls else None)
        client.start()
        try:
            if follower_tls:
                while follower.written_position < master.written_position:
                    await asyncio.sleep(0.01)
            else:
                while client.state.connections_total < 2:  # refused, retried
                    await asyncio.sleep(0.01)
        finally:
            await client.close()
            with contextlib.suppress(Exception):
                await server.close()
        return follower.written_position, client.state.last_error

    position, error = run(lambda: asyncio.wait_for(scenario(), 60))
    assert position == (master.written_position if follower_tls else 0), error
    master.close()
    follower.close()
