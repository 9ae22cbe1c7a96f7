"""Which role a writer runs: store.role, `--role/--master`, and replication.role_by_hostname
(one config file for every pod of a StatefulSet)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.services.common.settings.config_file import load_config
from mqstore.services.writer.run import resolve_role, with_role
from mqstore.storage import BrokerRole, ConfigError

SHARED = """
data_dir: /data
store: {role: sync_master, pool_enabled: true}
replication: {port: 8084, master: "broker-0.broker-headless.ns.svc:8084", role_by_hostname: true}
"""


def test_role_by_hostname_gives_pod_0_the_master_role_and_the_others_the_follower_role(
        tmp_path: Path) -> None:
    path = tmp_path / "mqstore.yaml"
    path.write_text(SHARED)
    config = load_config(path, environ={})
    master = resolve_role(config, hostname="broker-0")
    assert (master.store.role, master.store.pool_enabled) == (BrokerRole.SYNC_MASTER, True)
    assert master.replication.master == ""
    follower = resolve_role(config, hostname="broker-2.broker-headless.ns.svc.cluster.local")
    assert follower.store.role is BrokerRole.FOLLOWER
    assert follower.store.pool_enabled is False  # a follower never uses the pool
    assert follower.replication.master_address == ("broker-0.broker-headless.ns.svc", 8084)


def test_flags_override_the_file_and_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "mqstore.yaml"
    path.write_text("data_dir: /data\nstore: {pool_enabled: true}\n")
    config = load_config(path, environ={})
    follower = with_role(config, role=BrokerRole.FOLLOWER, master="10.0.0.1:8084")
    assert (follower.store.role, follower.store.pool_enabled) == (BrokerRole.FOLLOWER, False)
    assert resolve_role(follower, hostname="anything") is follower
    with pytest.raises(ConfigError, match=r"needs replication\.master"):
        with_role(config, role=BrokerRole.FOLLOWER, master=None)
    with pytest.raises(ConfigError, match="a follower's setting"):
        with_role(config, role=BrokerRole.SYNC_MASTER, master="10.0.0.1:8084")
    with pytest.raises(ConfigError, match="host:port"):
        with_role(config, role=BrokerRole.FOLLOWER, master="10.0.0.1")


@pytest.mark.parametrize(("text", "message"), [
    ("replication: {role_by_hostname: true}", "needs master"),
    ("replication: {housekeeping_interval_ms: 100, heartbeat_interval_ms: 100}", "exceed"),
    ("replication: {batch_bytes_max: 0}", "batch_bytes_max"),
    ("store: {role: follower}\nreplication: {master: 'h:1', role_by_hostname: true}",
     "must be a master role"),
    ("store: {role: leader}", "not one of"),
])
def test_bad_replication_settings_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "mqstore.yaml"
    path.write_text("data_dir: /data\n" + text + "\n")
    with pytest.raises(ConfigError, match=message):
        load_config(path, environ={})
