"""A Broker's Secrets and NetworkPolicies against the real API server, with the operator
running as a process under the chart's RBAC (Secrets: get and create only).

The policies are only applied here: the control plane has no network plugin, and the
real node's bridge plugin enforces none (docs/kubernetes.md)."""

from __future__ import annotations

import base64
from typing import Any

import yaml

from .conftest import OperatorProcess, broker_manifest
from .kube import Kube, condition, wait_for


def _owner(child: dict[str, Any]) -> tuple[str, str, bool]:
    owner = child["metadata"]["ownerReferences"][0]
    return owner["kind"], owner["name"], owner["controller"]


def _decoded(secret: dict[str, Any], key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


def test_a_broker_gets_owned_secrets_once_and_a_network_policy(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    kube.apply(broker_manifest("sigma", namespace))
    users = wait_for("the users Secret", lambda: kube.get("secret", "sigma-users", namespace))
    replication = wait_for("the replication Secret",
                           lambda: kube.get("secret", "sigma-replication", namespace))
    policy = wait_for("the NetworkPolicy",
                      lambda: kube.get("networkpolicy", "sigma", namespace))
    for child in (users, replication, policy):
        assert _owner(child) == ("Broker", "sigma", True)
    accounts = yaml.safe_load(_decoded(users, "plain_acl.yml"))["accounts"]
    assert [(a["accessKey"], a["admin"]) for a in accounts] == [("mqstore-admin", True)]
    assert accounts[0]["secretKey"] == _decoded(users, "secretKey")
    assert len(_decoded(replication, "replication-secret")) >= 16
    ingress = {tuple(p["port"] for p in rule["ports"]): rule["from"]
               for rule in policy["spec"]["ingress"]}
    assert ingress[(8084,)] == [{"podSelector": {"matchLabels": {
        "app.kubernetes.io/component": "broker", "app.kubernetes.io/instance": "sigma",
        "app.kubernetes.io/name": "mqstore"}}}]
    assert ingress[(8081, 8083, 9876)] == [{"podSelector": {}}]
    sts = wait_for("the StatefulSet", lambda: kube.get("statefulset", "sigma", namespace))
    (volume,) = [v for v in sts["spec"]["template"]["spec"]["volumes"] if v["name"] == "config"]
    assert [s.get("secret", {}).get("name") for s in volume["projected"]["sources"]] == [
        None, "sigma-users", "sigma-replication"]
    config = yaml.safe_load(kube.must_get("configmap", "sigma-config", namespace)["data"][
        "mqstore.yaml"])
    assert config["auth"]["users_file"] == "/etc/mqstore/auth/plain_acl.yml"
    # A spec change reconciles again; the Secrets are read, never rewritten.
    kube.merge_patch("broker", "sigma", namespace, {"spec": {"flush": {"mode": "sync"}}})
    wait_for("the flush change", lambda: "flush_mode: sync" in kube.must_get(
        "configmap", "sigma-config", namespace)["data"]["mqstore.yaml"])
    for before in (users, replication):
        after = kube.must_get("secret", before["metadata"]["name"], namespace)
        assert after["data"] == before["data"]
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # Clients from one labelled namespace only; policies off removes the policy.
    kube.merge_patch("broker", "sigma", namespace, {"spec": {"network": {"clients": [
        {"namespaceSelector": {"matchLabels": {"team": "orders"}}}]}}})
    wait_for("the new client peers", lambda: any(
        rule["from"] == [{"namespaceSelector": {"matchLabels": {"team": "orders"}}}]
        for rule in kube.must_get("networkpolicy", "sigma", namespace)["spec"]["ingress"]))
    kube.merge_patch("broker", "sigma", namespace, {"spec": {"network": {"policies": False}}})
    wait_for("the policy deleted",
             lambda: kube.get("networkpolicy", "sigma", namespace) is None)


def test_a_missing_named_secret_is_reported_and_none_is_generated(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    kube.apply(broker_manifest("tau", namespace, security={
        "usersSecret": "team-users", "tlsSecret": "tau-tls"}))
    degraded = wait_for("Degraded", lambda: (c := condition(kube.get(
        "broker", "tau", namespace), "Degraded")) and c["status"] == "True" and c)
    assert "Secret " + namespace + "/team-users (spec.security.usersSecret) does not exist" \
        in degraded["message"]
    assert "tau-tls" in degraded["message"]
    assert kube.get("secret", "tau-users", namespace) is None
    kube.apply({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "team-users", "namespace": namespace},
                "stringData": {"plain_acl.yml": "accounts: []\n"}})
    kube.apply({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "tau-tls", "namespace": namespace},
                "data": {"tls.crt": "", "tls.key": "", "ca.crt": ""}})
    wait_for("Degraded False", lambda: (c := condition(kube.get(
        "broker", "tau", namespace), "Degraded")) and c["status"] == "False")
    sts = kube.must_get("statefulset", "tau", namespace)
    probe = sts["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]
    assert probe["scheme"] == "HTTPS"
