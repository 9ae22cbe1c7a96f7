"""A Broker's life against the real API server, with the operator running as a process:
children, config hashes, volume growth, scaling, deletion.

kube-controller-manager runs the StatefulSet controller (it creates the Pods and claims)
and the garbage collector; there is no kubelet.  What pods and volumes do when they run
(readiness in `kubectl get brokers`, rolls, crashes, claims kept on deletion) is shown on
the real node instead (e2e/test_node_flows.py).  One test here still plays the kubelet and
the volume resizer, for what the real node cannot do: grow a volume (see its docstring)."""

from __future__ import annotations

from typing import Any

import yaml

from .conftest import OperatorProcess, broker_manifest
from .kube import Kube, condition, wait_for

HASH = "mqstore.io/config-hash"
GC_WAIT_S = 120.0
"""The garbage collector learns of a new resource type (Broker) by re-reading discovery
every 30 s: until then it cannot tell that an owner is gone."""


def _children(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return {"statefulset": kube.get("statefulset", name, namespace),
            "configmap": kube.get("configmap", f"{name}-config", namespace),
            "service": kube.get("service", name, namespace),
            "headless": kube.get("service", f"{name}-headless", namespace),
            "pdb": kube.get("pdb", name, namespace)}


def _ready_pod(kube: Kube, namespace: str, pod: str) -> None:
    """What a kubelet would report for a started, ready pod."""
    kube.merge_patch("pod", pod, namespace, {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"},
                                           {"type": "ContainersReady", "status": "True"}]}},
        subresource="status")


def _bind_claim(kube: Kube, namespace: str, claim: str, size: str) -> None:
    """What a volume provisioner would report: bound, at its requested size."""
    kube.merge_patch("pvc", claim, namespace, {"status": {
        "phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": size}}},
        subresource="status")


def test_a_broker_gets_its_statefulset_config_services_and_budget(
        kube: Kube, namespace: str) -> None:
    kube.apply(broker_manifest("alpha", namespace, flush={"mode": "sync", "intervalMs": 200},
                               pool={"enabled": True, "bufferCount": 3}))
    children = wait_for("every child", lambda: (
        found := _children(kube, namespace, "alpha")) and all(found.values()) and found)
    sts = children["statefulset"]
    pod = sts["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["writer", "indexer", "notifier"]
    assert pod["initContainers"][0]["command"][:2] == ["mqstore", "preallocate"]
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"] == {
        "storage": "1Gi"}
    config = yaml.safe_load(children["configmap"]["data"]["mqstore.yaml"])
    assert config["store"]["flush_mode"] == "sync"
    assert config["store"]["flush_interval_ms"] == 200
    assert (config["store"]["pool_enabled"], config["store"]["pool_buffer_count"]) == (True, 3)
    assert config["store"]["role"] == "async_master"
    assert config["replication"]["master"] == f"alpha-0.alpha-headless.{namespace}.svc:8084"
    assert sts["spec"]["template"]["metadata"]["annotations"][HASH] == \
        children["configmap"]["metadata"]["annotations"][HASH]
    assert children["headless"]["spec"]["clusterIP"] == "None"
    assert children["pdb"]["spec"]["maxUnavailable"] == 1
    for child in children.values():
        owner = child["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Broker", "alpha", True)
    broker = wait_for("status", lambda: (b := kube.must_get("broker", "alpha", namespace))
                      .get("status", {}).get("observedGeneration") == 1 and b)
    assert broker["status"]["configHash"] == config_hash_of(children["configmap"])
    assert broker["status"]["labelSelector"] == (
        "app.kubernetes.io/component=broker,app.kubernetes.io/instance=alpha,"
        "app.kubernetes.io/name=mqstore")


def config_hash_of(config_map: dict[str, Any]) -> str:
    value: str = config_map["metadata"]["annotations"][HASH]
    return value


def test_a_flush_change_changes_the_pod_templates_config_hash(
        kube: Kube, namespace: str) -> None:
    kube.apply(broker_manifest("beta", namespace))
    first = wait_for("the StatefulSet", lambda: kube.get("statefulset", "beta", namespace))
    old_hash = first["spec"]["template"]["metadata"]["annotations"][HASH]
    kube.merge_patch("broker", "beta", namespace, {"spec": {"flush": {"mode": "sync"}}})
    new_hash = wait_for("a new config hash", lambda: (h := kube.must_get(
        "statefulset", "beta", namespace)["spec"]["template"]["metadata"]["annotations"][
        HASH]) != old_hash and h)
    config_map = kube.must_get("configmap", "beta-config", namespace)
    assert "flush_mode: sync" in config_map["data"]["mqstore.yaml"]
    assert config_hash_of(config_map) == new_hash
    wait_for("status.configHash", lambda: kube.must_get("broker", "beta", namespace)[
        "status"].get("configHash") == new_hash)
    before = kube.must_get("statefulset", "beta", namespace)
    kube.merge_patch("broker", "beta", namespace, {"spec": {"writer": {"resources": {
        "requests": {"cpu": "2"}}}}})
    wait_for("the resources change", lambda: kube.must_get("statefulset", "beta", namespace)[
        "spec"]["template"]["spec"]["containers"][0]["resources"].get("requests"))
    after = kube.must_get("statefulset", "beta", namespace)
    assert after["spec"]["template"]["metadata"]["annotations"][HASH] == \
        before["spec"]["template"]["metadata"]["annotations"][HASH], "same config, same hash"


def test_growing_storage_patches_the_claims(kube: Kube, namespace: str) -> None:
    """Kept with a played kubelet and resizer: the real node's local-path provisioner cannot
    expand a volume (e2e/test_node_volume.py shows the resize refused), and growth needs a
    CSI driver with an external resizer.  The test marks the claim Bound at each size (the
    resizer's answer) and the pod Ready (VolumesResizing is reported only once the pods are
    ready, ahead of it come RollingUpdate and Scaling)."""
    kube.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": f"grow-{namespace}"}, "provisioner": "example.com/none",
                "allowVolumeExpansion": True})
    kube.apply(broker_manifest("delta", namespace,
                               storage={"storageClassName": f"grow-{namespace}"}))
    wait_for("claim data-delta-0", lambda: kube.get("pvc", "data-delta-0", namespace))
    _bind_claim(kube, namespace, "data-delta-0", "1Gi")
    wait_for("pod delta-0", lambda: kube.get("pod", "delta-0", namespace))
    _ready_pod(kube, namespace, "delta-0")
    wait_for("status.currentStorage 1Gi", lambda: kube.must_get("broker", "delta", namespace)[
        "status"].get("currentStorage") == "1Gi")
    kube.merge_patch("broker", "delta", namespace, {"spec": {"storage": {"size": "2Gi"}}})
    wait_for("the claim's request to grow", lambda: kube.must_get(
        "pvc", "data-delta-0", namespace)["spec"]["resources"]["requests"]["storage"] == "2Gi")
    resizing = wait_for("Progressing VolumesResizing", lambda: (c := condition(kube.get(
        "broker", "delta", namespace), "Progressing")) and c["reason"] == "VolumesResizing" and c)
    assert "data-delta-0" in resizing["message"]
    sts = kube.must_get("statefulset", "delta", namespace)
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"][
        "storage"] == "1Gi", "the StatefulSet's claim template is immutable and stays"
    _bind_claim(kube, namespace, "data-delta-0", "2Gi")  # the resizer finished
    wait_for("status.currentStorage 2Gi", lambda: kube.must_get("broker", "delta", namespace)[
        "status"].get("currentStorage") == "2Gi")
    # A claim grown by hand beyond the spec is left alone: nothing tries to shrink it.
    kube.merge_patch("pvc", "data-delta-0", namespace,
                     {"spec": {"resources": {"requests": {"storage": "3Gi"}}}})
    _bind_claim(kube, namespace, "data-delta-0", "3Gi")
    wait_for("status.currentStorage 3Gi", lambda: kube.must_get("broker", "delta", namespace)[
        "status"].get("currentStorage") == "3Gi")
    assert condition(kube.get("broker", "delta", namespace), "Degraded")[  # type: ignore[index]
        "status"] == "False"


def test_scale_down_is_refused_until_annotated(kube: Kube, namespace: str) -> None:
    kube.apply(broker_manifest("eps", namespace, replicas=2))
    wait_for("2 replicas", lambda: (kube.get("statefulset", "eps", namespace) or {}).get(
        "spec", {}).get("replicas") == 2)
    kube.kubectl("scale", "broker/eps", "-n", namespace, "--replicas=1")
    refused = wait_for("Degraded ScaleDownRefused", lambda: (c := condition(kube.get(
        "broker", "eps", namespace), "Degraded")) and c["reason"] == "ScaleDownRefused" and c)
    assert "mqstore.io/allow-scale-down" in refused["message"]
    assert kube.must_get("statefulset", "eps", namespace)["spec"]["replicas"] == 2
    events = wait_for("a ScaleDownRefused Event", lambda: [
        e for e in kube.items("events", namespace)
        if e["reason"] == "ScaleDownRefused" and e["involvedObject"]["name"] == "eps"])
    assert events[0]["type"] == "Warning"
    kube.kubectl("annotate", "broker/eps", "-n", namespace, "mqstore.io/allow-scale-down=true")
    wait_for("1 replica", lambda: kube.must_get("statefulset", "eps", namespace)["spec"][
        "replicas"] == 1)
    wait_for("Degraded=False", lambda: condition(kube.get("broker", "eps", namespace),
                                                 "Degraded")["status"] == "False")  # type: ignore[index]
    scale = kube.kubectl("get", "--raw", f"/apis/mqstore.io/v1alpha1/namespaces/{namespace}"
                         "/brokers/eps/scale").stdout
    assert '"replicas":1' in scale


def test_deleting_a_broker_removes_its_children_and_keeps_its_claims(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    kube.apply(broker_manifest("zeta", namespace))
    wait_for("claim data-zeta-0", lambda: kube.get("pvc", "data-zeta-0", namespace))
    broker = kube.must_get("broker", "zeta", namespace)
    assert "mqstore.io/finalizer" in broker["metadata"]["finalizers"]
    kube.kubectl("delete", "broker", "zeta", "-n", namespace, "--wait=false")
    wait_for("the Broker to be gone", lambda: kube.get("broker", "zeta", namespace) is None)
    wait_for("every child to be collected", lambda: not any(
        _children(kube, namespace, "zeta").values()), timeout_s=GC_WAIT_S)
    wait_for("pod zeta-0 to be collected", lambda: kube.get("pod", "zeta-0", namespace) is None,
             timeout_s=GC_WAIT_S)
    assert kube.get("pvc", "data-zeta-0", namespace) is not None, "claims are kept"


def test_delete_claim_takes_the_claims_along(kube: Kube, namespace: str) -> None:
    kube.apply(broker_manifest("kappa", namespace, storage={"deleteClaim": True}))
    wait_for("claim data-kappa-0", lambda: kube.get("pvc", "data-kappa-0", namespace))
    sts = kube.must_get("statefulset", "kappa", namespace)
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
    kube.kubectl("delete", "broker", "kappa", "-n", namespace, "--wait=false")
    wait_for("the claim to be collected with its StatefulSet",
             lambda: kube.get("pvc", "data-kappa-0", namespace) is None, timeout_s=GC_WAIT_S)


def test_extra_notifiers_share_the_masters_claim(kube: Kube, namespace: str) -> None:
    kube.apply(broker_manifest("lam", namespace, storage={"accessModes": ["ReadWriteMany"]},
                               notifier={"replicas": 2}))
    deployment = wait_for("the notifiers' Deployment",
                          lambda: kube.get("deployment", "lam-notifier", namespace))
    assert deployment["spec"]["replicas"] == 2
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-lam-0"}} in volumes
    assert kube.get("service", "lam-notifier", namespace) is not None
    policy = kube.must_get("networkpolicy", "lam-notifier", namespace)
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == \
        "notifier"
    kube.merge_patch("broker", "lam", namespace, {"spec": {"notifier": {"replicas": 0}}})
    wait_for("the Deployment, its Service and its NetworkPolicy to go", lambda: all(
        kube.get(kind, "lam-notifier", namespace) is None
        for kind in ("deployment", "service", "networkpolicy")))
