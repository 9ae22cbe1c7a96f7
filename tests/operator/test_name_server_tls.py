"""A cluster with `security.tlsSecret` (operator/name_server.py, operator/config_map.py):
the name servers mount the Secret as the brokers' pods do and serve only TLS, and every
group registers over TLS; without the Secret, or without name servers, nothing changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mqstore.operator import names
from mqstore.operator.config_map import build_config_map
from mqstore.operator.groups import group_view
from mqstore.operator.name_server import build_namesrv_deployment
from mqstore.operator.spec import parse_spec
from mqstore.services.common.settings.config_file import load_config

from .broker_fixtures import broker

IMAGE = "registry.example/mqstore:1"
CLUSTER = {"storage": {"size": "10Gi"}, "replicas": 2, "groups": 2,
           "nameServer": {"replicas": 2}}
TLS = {"security": {"tlsSecret": "demo-tls"}}


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    body = broker(spec=spec)
    deployment = build_namesrv_deployment(body, parse_spec(body["spec"]), image=IMAGE)
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def _group_config(spec: dict[str, Any], index: int = 1) -> dict[str, Any]:
    body = broker(spec=spec)
    view = group_view(body, index, clustered=True)
    config_map = build_config_map(view, parse_spec(body["spec"]))
    document: dict[str, Any] = yaml.safe_load(config_map["data"][names.CONFIG_FILE])
    return document


def test_the_name_servers_mount_the_tls_secret_and_serve_only_tls() -> None:
    external = {"external": {"enabled": True, "host": "node.example"}}
    pod = _pod({**CLUSTER, **TLS, "network": external})
    (namesrv,) = pod["containers"]
    assert namesrv["command"] == [
        "mqstore", "namesrv", "--host", "0.0.0.0", "--port", "9876", "--external-port",
        "9877", "--tls-cert-file", "/etc/mqstore/tls/tls.crt",
        "--tls-key-file", "/etc/mqstore/tls/tls.key"]
    assert namesrv["volumeMounts"] == [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "tls", "mountPath": "/etc/mqstore/tls", "readOnly": True}]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes["tls"] == {"name": "tls", "projected": {"sources": [{"secret": {
        "name": "demo-tls", "items": [
            {"key": key, "path": key, "mode": 0o440}
            for key in ("tls.crt", "tls.key", "ca.crt")]}}]}}
    assert namesrv["readinessProbe"]["tcpSocket"] == {"port": "remoting"}
    assert namesrv["livenessProbe"]["tcpSocket"] == {"port": "remoting"}


def test_without_a_tls_secret_the_name_servers_are_plain() -> None:
    pod = _pod(CLUSTER)
    (namesrv,) = pod["containers"]
    assert namesrv["command"] == ["mqstore", "namesrv", "--host", "0.0.0.0", "--port", "9876"]
    assert namesrv["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert [volume["name"] for volume in pod["volumes"]] == ["tmp"]
    assert "namesrv_tls_enabled" not in _group_config(CLUSTER)["remoting"]


def test_each_group_registers_over_tls(tmp_path: Path) -> None:
    for index in (0, 1):
        document = _group_config({**CLUSTER, **TLS}, index)
        assert document["remoting"]["namesrv_tls_enabled"] is True
        assert document["remoting"]["namesrv_addresses"] == \
            "demo-namesrv-headless.ns1.svc:9876"
        assert document["tls"]["ca_file"] == "/etc/mqstore/tls/ca.crt"
    config = tmp_path / "mqstore.yaml"
    config.write_text(yaml.safe_dump(document))
    assert load_config(config).remoting.namesrv_tls_enabled, "the services accept it"


def test_a_broker_without_name_servers_registers_nowhere_even_with_tls() -> None:
    body = broker(spec={"storage": {"size": "10Gi"}, **TLS})
    config_map = build_config_map(body, parse_spec(body["spec"]))
    remoting = yaml.safe_load(config_map["data"][names.CONFIG_FILE])["remoting"]
    assert "namesrv_addresses" not in remoting
    assert "namesrv_tls_enabled" not in remoting
