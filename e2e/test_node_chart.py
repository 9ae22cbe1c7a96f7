"""The chart on the real node, end to end: `helm install` runs the operator as a pod of the
mqstore image under the restricted Pod Security Standard, and a Broker becomes Ready with
its writer, indexer and notifier running as real containers on a volume the provisioner
made, where the writer's commit log lands on the host's disk as uid 10001."""

from __future__ import annotations

from pathlib import Path

from .kube import Kube, condition, wait_for
from .node_addons import STORAGE_CLASS
from .node_pods import MQSTORE_UID, restricted_namespace
from .node_state import Node

BROKER_READY_TIMEOUT_S = 180.0
"""Scheduling, a helper pod making the volume, three containers and their probes, and the
operator's resync (2 s here): about 30 s measured on a loaded 2-core machine."""
SMALL = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
"""The defaults ask for a whole core for the writer: more than this node offers."""


def test_the_chart_runs_a_broker_on_the_node(node: Node, node_kube: Kube,
                                             node_release: str) -> None:
    operator = node_kube.items("pods", node_release)
    assert [p["status"]["phase"] for p in operator] == ["Running"], operator

    namespace = restricted_namespace(node_kube)
    node_kube.apply({"apiVersion": "mqstore.io/v1alpha1", "kind": "Broker",
                     "metadata": {"name": "smoke", "namespace": namespace},
                     "spec": {"replicas": 1,
                              "storage": {"size": "1Gi", "segmentSizeBytes": 67108864},
                              "writer": {"resources": SMALL}, "indexer": {"resources": SMALL},
                              "notifier": {"resources": SMALL}}})
    wait_for("the Broker to be Ready", lambda: (condition(
        node_kube.get("broker", "smoke", namespace), "Ready") or {}).get("status") == "True",
        timeout_s=BROKER_READY_TIMEOUT_S)

    pod = node_kube.must_get("pod", "smoke-0", namespace)
    ready = {s["name"]: s["ready"] for s in pod["status"]["containerStatuses"]}
    assert ready == {"writer": True, "indexer": True, "notifier": True}, ready
    claim = node_kube.must_get("pvc", "data-smoke-0", namespace)
    assert claim["spec"]["storageClassName"] == STORAGE_CLASS
    assert claim["status"]["phase"] == "Bound"
    volume = node_kube.must_get("pv", claim["spec"]["volumeName"])
    commit_log = Path(volume["spec"]["local"]["path"]) / "commitlog"
    assert commit_log.is_relative_to(node.directory / "volumes")
    segments = list(commit_log.iterdir())
    assert segments, f"no commit-log segment in {commit_log}"
    assert {s.stat().st_uid for s in segments} == {MQSTORE_UID}
