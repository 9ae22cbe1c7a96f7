"""The Secrets in a Broker's pods: which are generated, where their files land, and that
the config file names exactly those files."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from mqstore.operator import names
from mqstore.operator.config_map import config_document
from mqstore.operator.network import build_notifier_deployment
from mqstore.operator.pod_secrets import (
    ADMIN_ACCESS_KEY,
    build_generated_secret,
    secret_problem,
    secrets_in_use,
)
from mqstore.operator.spec import parse_spec
from mqstore.operator.statefulset import build_statefulset

from .broker_fixtures import broker


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    body = broker(spec=spec)
    pod: dict[str, Any] = build_statefulset(body, parse_spec(body["spec"]), image="i",
                                            replicas=1, config_hash="h")["spec"]["template"][
        "spec"]
    return pod


def _files(pod: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Every file of the config volume: path under /etc/mqstore -> (Secret, key)."""
    (config,) = [v for v in pod["volumes"] if v["name"] == "config"]
    files = {}
    for source in config["projected"]["sources"]:
        if "configMap" in source:
            files[names.CONFIG_FILE] = (source["configMap"]["name"], names.CONFIG_FILE)
            continue
        for item in source["secret"]["items"]:
            assert item["mode"] == 0o440
            files[item["path"]] = (source["secret"]["name"], item["key"])
    return files


def _config(spec: dict[str, Any]) -> dict[str, Any]:
    return config_document(parse_spec(broker(spec=spec)["spec"]), broker_name="demo",
                           namespace="ns1")


def _named_files(document: dict[str, Any]) -> set[str]:
    """The paths under /etc/mqstore that the config file names."""
    paths = [document.get("auth", {}).get("users_file"),
             document["replication"].get("secret_file"),
             *(document.get("tls") or {}).values()]
    prefix = names.CONFIG_DIR + "/"
    assert all(path.startswith(prefix) for path in paths if path)
    return {path.removeprefix(prefix) for path in paths if path}


def test_by_default_users_and_replication_secrets_are_generated_and_mounted() -> None:
    spec = {"storage": {"size": "10Gi"}}
    files = _files(_pod(spec))
    assert files == {"mqstore.yaml": ("demo-config", "mqstore.yaml"),
                     "auth/plain_acl.yml": ("demo-users", "plain_acl.yml"),
                     "replication/secret": ("demo-replication", "replication-secret")}
    document = _config(spec)
    assert document["auth"] == {"users_file": "/etc/mqstore/auth/plain_acl.yml"}
    assert "tls" not in document
    assert _named_files(document) == set(files) - {"mqstore.yaml"}
    in_use = secrets_in_use("demo", parse_spec(broker(spec=spec)["spec"]))
    assert [(u.name, u.generated) for u in in_use.all()] == [
        ("demo-users", True), ("demo-replication", True)]


def test_named_secrets_are_mounted_and_never_generated() -> None:
    spec = {"storage": {"size": "10Gi"},
            "security": {"usersSecret": "team-users", "replicationSecret": "repl",
                         "tlsSecret": "demo-tls"}}
    files = _files(_pod(spec))
    assert files["auth/plain_acl.yml"] == ("team-users", "plain_acl.yml")
    assert files["replication/secret"] == ("repl", "replication-secret")
    assert {path: files[path] for path in files if path.startswith("tls/")} == {
        "tls/tls.crt": ("demo-tls", "tls.crt"), "tls/tls.key": ("demo-tls", "tls.key"),
        "tls/ca.crt": ("demo-tls", "ca.crt")}
    document = _config(spec)
    assert document["tls"] == {"cert_file": "/etc/mqstore/tls/tls.crt",
                               "key_file": "/etc/mqstore/tls/tls.key",
                               "ca_file": "/etc/mqstore/tls/ca.crt"}
    assert _named_files(document) == set(files) - {"mqstore.yaml"}
    in_use = secrets_in_use("demo", parse_spec(broker(spec=spec)["spec"]))
    assert not any(use.generated for use in in_use.all())


def test_without_a_users_secret_authentication_is_off_but_replication_is_not() -> None:
    spec = {"storage": {"size": "10Gi"}, "security": {"generateUsersSecret": False}}
    document = _config(spec)
    assert "auth" not in document
    assert document["replication"]["secret_file"] == "/etc/mqstore/replication/secret"
    assert set(_files(_pod(spec))) == {"mqstore.yaml", "replication/secret"}


def test_tls_turns_the_probes_and_the_notifiers_link_to_https() -> None:
    plain = _pod({"storage": {"size": "10Gi"}})
    assert {c["readinessProbe"]["httpGet"]["scheme"] for c in plain["containers"]} == {"HTTP"}
    spec = {"storage": {"size": "10Gi", "accessModes": ["ReadWriteMany"]},
            "security": {"tlsSecret": "demo-tls"}, "notifier": {"replicas": 1}}
    pod = _pod(spec)
    for container in pod["containers"]:
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    assert _config(spec)["notifier"]["indexer_url"] == "https://127.0.0.1:8082"
    body = broker(spec=spec)
    deployment = build_notifier_deployment(body, parse_spec(body["spec"]), image="i",
                                           config_hash="h")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["env"][0]["value"] == "https://demo-0.demo-headless:8082"
    assert "tls/tls.key" in _files(deployment["spec"]["template"]["spec"])


def test_the_generated_users_secret_holds_one_admin_and_belongs_to_the_broker() -> None:
    body = broker()
    in_use = secrets_in_use("demo", parse_spec(body["spec"]))
    assert in_use.users is not None
    secret = build_generated_secret(body, in_use.users, random_text="r" * 43)
    assert secret["metadata"]["name"] == "demo-users"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    users = yaml.safe_load(secret["stringData"]["plain_acl.yml"])
    assert users["accounts"] == [{"accessKey": ADMIN_ACCESS_KEY, "secretKey": "r" * 43,
                                  "admin": True}]
    assert len(ADMIN_ACCESS_KEY) > 6, "RocketMQ refuses shorter access keys"
    assert (secret["stringData"]["accessKey"], secret["stringData"]["secretKey"]) == (
        ADMIN_ACCESS_KEY, "r" * 43)
    replication = build_generated_secret(body, in_use.replication, random_text="s" * 43)
    assert replication["metadata"]["name"] == "demo-replication"
    assert replication["stringData"] == {"replication-secret": "s" * 43}


@pytest.mark.parametrize(("live", "problem"), [
    (None, "Secret ns1/team (spec.security.usersSecret) does not exist"),
    ({"data": {"users.yml": "eA=="}}, "Secret ns1/team (spec.security.usersSecret) has no "
                                      "key plain_acl.yml"),
    ({"data": {"plain_acl.yml": "eA=="}}, None),
])
def test_a_named_secret_the_pods_cannot_mount_is_a_problem(
        live: dict[str, Any] | None, problem: str | None) -> None:
    spec = parse_spec(broker(spec={"storage": {"size": "10Gi"},
                                   "security": {"usersSecret": "team"}})["spec"])
    users = secrets_in_use("demo", spec).users
    assert users is not None
    found = secret_problem(users, live, namespace="ns1")
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(problem)
