"""Crashing a pod's containers from the node, as the kernel's OOM killer or a dying process
would: SIGKILL every process in a container's cgroup (`kill -9`; a container's main process
is its namespace's pid 1, which no signal from inside the container can kill).  The
kubelet sees the container exit and restarts it in the same pod, on the same volume."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .kube import Kube, wait_for
from .node_host_state import CGROUP_ROOT, kill_cgroup
from .node_state import Node

RESTART_TIMEOUT_S = 180.0
"""The kubelet's restart back-off starts at 10 s; then the startup and readiness probes."""


def _container_ids(pod: dict[str, Any]) -> dict[str, str]:
    return {status["name"]: status["containerID"].split("://", 1)[1]
            for status in pod["status"]["containerStatuses"] if status.get("containerID")}


def container_cgroup(node: Node, pod: dict[str, Any], container: str) -> str:
    """The container's cgroup relative to the hierarchies' root:
    `<node cgroup>/kubepods/<QoS class>/pod<uid>/<container id>` (the kubelet's cgroupfs
    layout under its cgroupRoot; a Guaranteed pod has no QoS level)."""
    container_id = _container_ids(pod)[container]
    pods = CGROUP_ROOT / "pids" / node.cgroup / "kubepods"
    found = [path for path in pods.rglob(container_id)
             if path.parent.name == f"pod{pod['metadata']['uid']}"]
    assert len(found) == 1, f"cgroup of {container} ({container_id}) under {pods}: {found}"
    return str(found[0].relative_to(CGROUP_ROOT / "pids"))


def restarts(pod: dict[str, Any]) -> dict[str, int]:
    return {s["name"]: int(s["restartCount"]) for s in pod["status"]["containerStatuses"]}


def kill_containers(node: Node, kube: Kube, namespace: str, pod_name: str,
                    containers: Sequence[str]) -> dict[str, int]:
    """kill -9 every process of `containers` at once; returns their restart counts from
    before, for `wait_restarted`."""
    pod = kube.must_get("pod", pod_name, namespace)
    before = restarts(pod)
    cgroups = [container_cgroup(node, pod, container) for container in containers]
    for cgroup in cgroups:
        killed = kill_cgroup(cgroup)
        assert killed >= 1, f"no process in {cgroup}"
    return {container: before[container] for container in containers}


def wait_restarted(kube: Kube, namespace: str, pod_name: str, before: dict[str, int]) -> None:
    """Until each container killed has restarted once more and every container is ready."""
    def back() -> bool:
        pod = kube.get("pod", pod_name, namespace)
        if pod is None:
            return False
        counts = restarts(pod)
        ready = all(s["ready"] for s in pod["status"]["containerStatuses"])
        return ready and all(counts[name] > count for name, count in before.items())

    wait_for(f"{', '.join(before)} of {pod_name} to restart and be ready", back,
             timeout_s=RESTART_TIMEOUT_S)
