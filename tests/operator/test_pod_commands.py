"""The pod's commands against the config file the operator renders: the services accept
it (they refuse unknown keys), and the init container's `mqstore preallocate` works."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.operator import names
from mqstore.operator.config_map import build_config_map
from mqstore.operator.spec import parse_spec
from mqstore.operator.statefulset import build_statefulset
from mqstore.services.cli.command import main
from mqstore.services.common.settings.config_file import load_config
from mqstore.services.writer.run import resolve_role
from mqstore.storage import BrokerRole, FlushMode

from .broker_fixtures import broker


def _rendered(tmp_path: Path, spec: dict[str, object]) -> tuple[Path, dict[str, object]]:
    body = broker(spec=spec)
    parsed = parse_spec(body["spec"])
    config_file = tmp_path / names.CONFIG_FILE
    config_file.write_text(build_config_map(body, parsed)["data"][names.CONFIG_FILE])
    pod = build_statefulset(body, parsed, image="i", replicas=1,
                            config_hash="h")["spec"]["template"]["spec"]
    return config_file, pod


def test_the_services_accept_the_rendered_config(tmp_path: Path) -> None:
    config_file, _ = _rendered(tmp_path, {"storage": {"size": "10Gi"},
                                          "flush": {"mode": "sync", "syncTimeoutMs": 900},
                                          "pool": {"enabled": True, "bufferCount": 2},
                                          "retention": {"deleteHours": [3, 4]}})
    config = load_config(config_file, environ={})
    assert config.data_dir == Path("/data")
    assert config.store.flush_mode is FlushMode.SYNC
    assert config.store.sync_flush_timeout_ms == 900
    assert (config.store.pool_enabled, config.store.pool_buffer_count) == (True, 2)
    assert config.store.delete_hours == (3, 4)
    assert (config.writer.port, config.indexer.port, config.notifier.port) == (8081, 8082, 8083)
    assert config.notifier.indexer_url == "http://127.0.0.1:8082"
    assert config.auth.users_file == "/etc/mqstore/auth/plain_acl.yml"
    assert config.replication.secret_file == "/etc/mqstore/replication/secret"


def test_the_services_accept_the_rendered_tls_settings(tmp_path: Path) -> None:
    config_file, _ = _rendered(tmp_path, {"storage": {"size": "10Gi"},
                                          "security": {"tlsSecret": "demo-tls"}})
    config = load_config(config_file, environ={})
    assert (config.tls.cert_file, config.tls.key_file, config.tls.ca_file) == (
        "/etc/mqstore/tls/tls.crt", "/etc/mqstore/tls/tls.key", "/etc/mqstore/tls/ca.crt")
    assert config.notifier.indexer_url == "https://127.0.0.1:8082"


def test_pod_0_masters_and_the_other_pods_follow_it(tmp_path: Path) -> None:
    config_file, pod = _rendered(tmp_path, {"storage": {"size": "10Gi"}, "replicas": 3,
                                            "replication": {"mode": "sync"},
                                            "pool": {"enabled": True}})
    config = load_config(config_file, environ={})
    master = resolve_role(config, hostname="demo-0")
    assert master.store.role is BrokerRole.SYNC_MASTER
    assert master.replication.master == ""
    assert master.store.pool_enabled
    follower = resolve_role(config, hostname="demo-2")
    assert follower.store.role is BrokerRole.FOLLOWER
    assert follower.replication.master == "demo-0.demo-headless.ns1.svc:8084"
    assert not follower.store.pool_enabled, "followers never use the pool"
    writer = pod["containers"][0]  # type: ignore[index]
    assert {"name": "replication", "containerPort": 8084, "protocol": "TCP"} in writer["ports"]


def test_the_init_containers_command_prepares_the_first_segment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_file, pod = _rendered(tmp_path, {"storage": {"size": "1Gi",
                                                        "segmentSizeBytes": 67108864}})
    (init,) = pod["initContainers"]  # type: ignore[misc]
    command = init["command"]
    assert command[:3] == ["mqstore", "preallocate", "--config"]
    assert command[3] == f"{names.CONFIG_DIR}/{names.CONFIG_FILE}"
    monkeypatch.setenv("MQSTORE_DATA_DIR", str(tmp_path / "data"))  # /data in the pod
    assert main([*command[1:3], str(config_file)]) == 0
    segment = tmp_path / "data" / "commitlog" / "00000000000000000000"
    assert segment.stat().st_size == 67108864
