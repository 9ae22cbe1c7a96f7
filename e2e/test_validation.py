"""Bad Broker specs are refused by the API server itself (the CRD's OpenAPI schema and CEL
rules), with a message that names the field: nothing reaches the operator."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import broker_manifest
from .kube import CommandError, Kube

NAMESPACE = "default"


def _refusal(kube: Kube, manifest: dict[str, Any]) -> str:
    with pytest.raises(CommandError) as refused:
        kube.kubectl("apply", "--dry-run=server", "-f", "-", stdin=json.dumps(manifest))
    return refused.value.stderr


@pytest.mark.parametrize(("spec", "message"), [
    ({"flush": {"mode": "eventually"}},
     'spec.flush.mode: Unsupported value: "eventually": supported values: "async", "sync"'),
    ({"pool": {"bufferCount": -1}},
     "spec.pool.bufferCount: Invalid value: -1: spec.pool.bufferCount in body should be "
     "greater than or equal to 1"),
    ({"replicas": 0}, "spec.replicas in body should be greater than or equal to 1"),
    ({"storage": {"size": "lots"}}, "storage.size must be a quantity such as 50Gi"),
    ({"storage": {"size": "100Mi"}}, "storage.size must hold at least two segments"),
    ({"storage": {"size": "1Gi", "segmentSizeBytes": 67108865}},
     "storage.segmentSizeBytes must be a multiple of the 4096-byte page"),
    ({"retention": {"diskWarningRatio": 0.5}},
     "need retention.diskMaxUsedRatio <= diskCleanForciblyRatio <= diskWarningRatio"),
    ({"retention": {"deleteHours": [24]}}, "should be less than or equal to 23"),
    ({"notifier": {"replicas": 2}}, "needs storage.accessModes [ReadWriteMany]"),
    ({"imagePullPolicy": "Sometimes"}, 'Unsupported value: "Sometimes"'),
    ({"replication": {"mode": "sync"}}, "replication.mode sync acknowledges only what a "
                                        "follower has: it needs replicas >= 2"),
    ({"security": {"usersSecret": "Not_A_Name"}}, "spec.security.usersSecret in body should "
                                                  "match"),
    ({"security": {"tlsSecret": ""}}, "spec.security.tlsSecret in body should be at least 1"),
    ({"security": {"generateUsersSecret": "yes"}}, "spec.security.generateUsersSecret"),
    ({"network": {"clients": [{}]}}, "a peer needs namespaceSelector, podSelector or ipBlock"),
    ({"network": {"metrics": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}},
     "a peer's ipBlock excludes namespaceSelector and podSelector"),
    ({"network": {"clients": [{"podSelector": {"matchExpressions": [
        {"key": "a", "operator": "Near"}]}}]}}, 'Unsupported value: "Near"'),
    ({"network": {"external": {"type": "Ingress"}}}, 'Unsupported value: "Ingress"'),
    ({"network": {"external": {"enabled": True}}}, "network.external.host is required when "
                                                   "network.external.enabled is true with "
                                                   "NodePorts"),
])
def test_schema_refuses_bad_values(kube: Kube, release: dict[str, Any],
                                   spec: dict[str, Any], message: str) -> None:
    assert message in _refusal(kube, broker_manifest("bad", NAMESPACE, **spec))


def test_a_spec_without_storage_is_refused(kube: Kube, release: dict[str, Any]) -> None:
    manifest = broker_manifest("bad", NAMESPACE)
    del manifest["spec"]["storage"]
    assert 'spec.storage: Required value' in _refusal(kube, manifest)


@pytest.mark.parametrize(("change", "message"), [
    ({"storage": {"size": "1536Mi"}}, "storage.size may only grow (volumes cannot shrink)"),
    ({"storage": {"storageClassName": "other"}}, "storage.storageClassName is immutable"),
    ({"storage": {"segmentSizeBytes": 134217728}}, "storage.segmentSizeBytes is immutable"),
    ({"storage": {"accessModes": ["ReadWriteMany"]}}, "storage.accessModes is immutable"),
])
def test_updates_that_storage_cannot_follow_are_refused(kube: Kube, release: dict[str, Any],
                                                        change: dict[str, Any],
                                                        message: str) -> None:
    name = f"immutable-{abs(hash(message)) % 10**6}"
    manifest = broker_manifest(name, NAMESPACE, storage={"size": "2Gi",
                                                         "storageClassName": "standard"})
    manifest["metadata"]["annotations"] = {"mqstore.io/pause-reconciliation": "true"}
    kube.apply(manifest)
    try:
        done = kube.merge_patch("broker", name, NAMESPACE, {"spec": change}, check=False)
        assert done.returncode != 0, f"{change} was accepted"
        assert message in done.stderr
        grown = kube.merge_patch("broker", name, NAMESPACE,
                                 {"spec": {"storage": {"size": "3Gi"}}})
        assert grown.returncode == 0, "growing is allowed"
    finally:
        kube.kubectl("delete", "broker", name, "-n", NAMESPACE, "--wait=false")


def test_defaults_are_filled_in_by_the_api_server(kube: Kube, release: dict[str, Any]) -> None:
    done = kube.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-",
                        stdin=json.dumps(broker_manifest("defaults", NAMESPACE)))
    spec = json.loads(done.stdout)["spec"]
    assert spec["replicas"] == 1
    assert spec["flush"] == {"mode": "async", "intervalMs": 500, "pagesMin": 4,
                             "thoroughIntervalMs": 10000, "syncTimeoutMs": 5000}
    assert spec["pool"] == {"enabled": False, "bufferCount": 5}
    assert spec["storage"]["accessModes"] == ["ReadWriteOnce"]
    assert spec["notifier"]["replicas"] == 0
    assert spec["security"] == {"generateUsersSecret": True}
    assert spec["network"] == {"policies": True, "clients": [{"podSelector": {}}],
                               "metrics": [{"namespaceSelector": {}, "podSelector": {
                                   "matchLabels": {"app.kubernetes.io/name": "prometheus"}}}],
                               "external": {"enabled": False, "type": "NodePort",
                                            "host": "", "nodePortBase": 30900}}
    assert (spec["groups"], spec["nameServer"]["replicas"]) == (1, 0)
