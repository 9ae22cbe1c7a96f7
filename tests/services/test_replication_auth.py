"""The replication secret: settings checks, `mqstore up`'s generated secret, and the
handshake seen from the follower (a master that does not know the secret is refused)."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from mqstore.services.cli.up import Supervisor, UpOptions
from mqstore.services.common.links.forward_secret import FORWARD
from mqstore.services.common.links.mutual_proof import DIALER_PROOF, ProofError
from mqstore.services.common.settings.replication import (
    ReplicationSettings,
    is_loopback,
    load_secret,
)
from mqstore.services.writer.replication_follower import ReplicationClient
from mqstore.services.writer.replication_handshake import REPLICATION
from mqstore.services.writer.replication_master import ReplicationServer
from mqstore.storage import BrokerRole, ConfigError, MessageStore
from tests.conftest import small_config
from tests.services.serving import run

SECRET = b"a-replication-secret-of-32-bytes"


@pytest.mark.parametrize("host", ["0.0.0.0", "", "10.0.0.5", "::", "broker-0.example"])
def test_a_link_reachable_from_the_network_needs_a_secret(host: str) -> None:
    with pytest.raises(ConfigError, match="secret_file is empty"):
        load_secret(ReplicationSettings(host=host), link_host=host)
    with pytest.raises(ConfigError, match="secret_file is empty"):  # a writer refuses at start
        ReplicationServer(ReplicationSettings(host=host))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.9", "::1", "localhost"])
def test_loopback_runs_without_a_secret(host: str) -> None:
    assert is_loopback(host)
    assert load_secret(ReplicationSettings(host=host), link_host=host) == b""


def test_a_secret_is_read_without_its_newline_and_must_be_long_enough(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_bytes(SECRET + b"\n")
    settings = ReplicationSettings(host="0.0.0.0", secret_file=str(path))
    assert load_secret(settings, link_host="0.0.0.0") == SECRET
    path.write_bytes(b"short\n")
    with pytest.raises(ConfigError, match="holds 5 bytes; at least 16"):
        load_secret(settings, link_host="0.0.0.0")
    with pytest.raises(ConfigError, match="cannot read it"):
        load_secret(ReplicationSettings(secret_file=str(tmp_path / "missing")),
                    link_host="127.0.0.1")


def test_proofs_bind_the_secret_both_nonces_and_the_side() -> None:
    hello, master_nonce = REPLICATION.hello()
    answer, heard_nonce, follower_nonce = REPLICATION.dialer_proof(SECRET, hello)
    assert heard_nonce == master_nonce
    master_proof = REPLICATION.listener_proof(SECRET, master_nonce, answer)
    REPLICATION.check_listener(SECRET, master_nonce, follower_nonce, master_proof)
    with pytest.raises(ProofError):
        REPLICATION.listener_proof(b"another secret of enough bytes", master_nonce, answer)
    with pytest.raises(ProofError):  # replayed to another connection
        REPLICATION.listener_proof(SECRET, REPLICATION.hello()[1], answer)
    with pytest.raises(ProofError):  # the master's proof reflected as a follower's
        REPLICATION.listener_proof(SECRET, master_nonce, follower_nonce + master_proof)
    with pytest.raises(ProofError, match="not a master's hello"):  # another link's hello
        REPLICATION.dialer_proof(SECRET, FORWARD.hello()[0])
    assert len(answer) == DIALER_PROOF.size


def test_a_follower_refuses_a_master_that_does_not_know_the_secret(tmp_path: Path) -> None:
    secret_path = tmp_path / "secret"
    secret_path.write_bytes(SECRET)
    follower = MessageStore.open(tmp_path / "f", small_config(role=BrokerRole.FOLLOWER))

    async def scenario() -> str | None:
        answered = asyncio.Event()

        async def fake_master(reader: asyncio.StreamReader,
                              writer: asyncio.StreamWriter) -> None:
            writer.write(REPLICATION.hello()[0])
            await reader.readexactly(DIALER_PROOF.size)
            writer.write(b"\x00" * 32)  # not the proof
            answered.set()
            await reader.read()  # until the follower hangs up
            writer.close()

        listener = await asyncio.start_server(fake_master, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        client = ReplicationClient(follower, ReplicationSettings(
            master=f"127.0.0.1:{port}", secret_file=str(secret_path),
            reconnect_interval_ms=60_000))
        client.start()
        await asyncio.wait_for(answered.wait(), 30)
        while client.state.last_error is None:
            await asyncio.sleep(0.01)
        await client.close()
        listener.close()
        return client.state.last_error

    assert "master's proof does not match" in (run(scenario) or "")
    assert follower.written_position == 0
    follower.close()


def test_up_keeps_one_owner_only_secret_per_data_directory(tmp_path: Path) -> None:
    options = UpOptions(data_dir=tmp_path, ports={"writer": 1, "indexer": 2, "notifier": 3},
                        host="0.0.0.0")
    supervisor = Supervisor(options, say=print)
    environment = supervisor._environment()
    supervisor.stop()  # nothing started
    path = Path(environment["MQSTORE_REPLICATION__SECRET_FILE"])
    assert path.parent == tmp_path
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    secret = load_secret(ReplicationSettings(host="0.0.0.0", secret_file=str(path)),
                         link_host="0.0.0.0")
    assert len(secret) == 64
    supervisor = Supervisor(options, say=print)
    again = supervisor._environment()
    supervisor.stop()
    assert path.read_bytes().rstrip() == secret
    assert again["MQSTORE_REPLICATION__HOST"] == "0.0.0.0"
