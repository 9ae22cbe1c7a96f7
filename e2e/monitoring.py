"""Monitoring of the real node's pods the way a cluster with the Prometheus Operator does
it: the operator turns the chart's PodMonitor, ServiceMonitor and PrometheusRule into the
running configuration of a Prometheus that discovers the pods through the real API server
(both built from the Go module proxy by e2e/build-monitoring.sh: Debian's prometheus has
no Kubernetes service discovery).

    python -m e2e.monitoring up [--dir DIR]    # into a running node (e2e/node.py up)
    python -m e2e.monitoring down [--dir DIR]  # deletes what `up` made

`up` imports the three images into the node's containerd, installs the operator's CRDs
(server-side apply: they are too large for the last-applied annotation), runs the operator
and one Prometheus in a restricted namespace, and prints how to reach Prometheus.  Charts
installed with `monitoring.*.labels.mqstore.io/prometheus=<name>` are picked up.  See
docs/dashboards.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import ssl
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from . import monitoring_manifests as manifests
from .kube import Kube, wait_for
from .node import DEFAULT_DIR, _script
from .node_state import Node, NodeError
from .prometheus import PrometheusApi

PROMETHEUS_NAME = "mqstore"
"""The Prometheus resource; also the value of `manifests.SELECTOR_LABEL` it selects by."""
PROMETHEUS_PORT = 9090
START_TIMEOUT_S = 180.0
"""The operator's pod, then Prometheus' (an init container, two containers, the first
config reload): under a minute measured on a loaded 2-core machine."""


@dataclasses.dataclass(frozen=True)
class MonitoringBuild:
    bin_dir: Path
    images: dict[str, tuple[str, Path]]
    """{role: (name, docker archive)}: operator, prometheus-config-reloader, prometheus."""

    @property
    def prometheus_version(self) -> str:
        """v3.13.1 from localhost/mqstore-e2e/prometheus:v3.13.1-<hash>."""
        return self.images["prometheus"][0].rsplit(":", 1)[1].split("-", 1)[0]


@dataclasses.dataclass(frozen=True)
class Stack:
    namespace: str
    prometheus_pod: str
    api: PrometheusApi


def build() -> MonitoringBuild:
    """The binaries and images of e2e/build-monitoring.sh (it reuses its cache)."""
    lines = _script("build-monitoring.sh")
    bin_dir = Path(lines[0].split(" ", 1)[1])
    images = {}
    for line in lines[1:]:
        role, name, archive = line.split()
        images[role] = (name, Path(archive))
    return MonitoringBuild(bin_dir=bin_dir, images=images)


def import_images(node: Node, built: MonitoringBuild) -> None:
    """`ctr images import` into the running node's containerd (the images `up` imported
    are the node's own; these come on demand)."""
    ctr = [str(node.node_bin_dir / "ctr"), f"--address={node.socket}", "--namespace=k8s.io"]
    for name, archive in built.images.values():
        done = subprocess.run([*ctr, "images", "import", str(archive)], capture_output=True,
                              text=True, check=False, timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            raise NodeError(f"ctr images import of {name}: {done.stderr.strip()}")


def install_crds(kube: Kube, built: MonitoringBuild) -> None:
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(built.bin_dir / "crds"))
    for path in sorted((built.bin_dir / "crds").glob("*.yaml")):
        name = path.name.removeprefix("monitoring.coreos.com_").removesuffix(".yaml")
        kube.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                     f"crd/{name}.monitoring.coreos.com")


def prometheus_api(node: Node, namespace: str, pod: str) -> PrometheusApi:
    """Prometheus' HTTP API through the API server's pod proxy: from the host over the
    127.0.0.1 forward, as the node's admin (kubectl port-forward works as well)."""
    config = json.loads(node.kubeconfig.read_text())
    ca_path = config["clusters"][0]["cluster"]["certificate-authority"]
    token = config["users"][0]["user"]["token"]
    return PrometheusApi(
        f"{node.server}/api/v1/namespaces/{namespace}/pods/{pod}:{PROMETHEUS_PORT}/proxy",
        headers={"Authorization": f"Bearer {token}"},
        context=ssl.create_default_context(cafile=ca_path))


def _available(kube: Kube, namespace: str, deployment: str) -> bool:
    found = kube.get("deployment", deployment, namespace) or {}
    return bool(found.get("status", {}).get("availableReplicas"))


def _ready(kube: Kube, namespace: str, pod: str) -> bool:
    found = kube.get("pod", pod, namespace) or {}
    statuses = found.get("status", {}).get("containerStatuses") or []
    return bool(statuses) and all(s["ready"] for s in statuses)


def _wait(kube: Kube, namespace: str, what: str, probe: Callable[[], bool]) -> None:
    """wait_for, and on a timeout the namespace's pods and recent events (why a pod is not
    ready: an image, a crash loop, a refused security context)."""
    try:
        wait_for(what, probe, timeout_s=START_TIMEOUT_S)
    except AssertionError as error:
        pods = kube.kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False).stdout
        events = kube.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp",
                              check=False).stdout
        tail = "\n".join(events.splitlines()[-15:])
        raise AssertionError(f"{error}\n{pods}\n{tail}") from None


def up(node: Node, built: MonitoringBuild, *, namespace: str | None = None) -> Stack:
    """The operator and one Prometheus in a fresh restricted namespace; returns once
    Prometheus answers (its configuration may still be empty: no monitor yet)."""
    kube = node.kube()
    namespace = namespace or f"monitoring-{uuid.uuid4().hex[:8]}"
    import_images(node, built)
    install_crds(kube, built)
    rbac_dir = built.bin_dir / "rbac"
    kube.apply(manifests.namespace(namespace))
    for manifest in manifests.operator(
            namespace_name=namespace, image=built.images["operator"][0],
            reloader_image=built.images["prometheus-config-reloader"][0], rbac_dir=rbac_dir):
        kube.apply(manifest)
    _wait(kube, namespace, "the Prometheus Operator to be available",
          lambda: _available(kube, namespace, manifests.OPERATOR))
    for manifest in manifests.prometheus(
            name=PROMETHEUS_NAME, namespace_name=namespace,
            image=built.images["prometheus"][0], version=built.prometheus_version,
            rbac_dir=rbac_dir):
        kube.apply(manifest)
    pod = manifests.pod_name(PROMETHEUS_NAME)
    _wait(kube, namespace, f"{namespace}/{pod} to be ready", lambda: _ready(kube, namespace, pod))
    return Stack(namespace=namespace, prometheus_pod=pod,
                 api=prometheus_api(node, namespace, pod))


def down(node: Node, namespace: str) -> None:
    """Deletes the namespace and the cluster-scoped RBAC named after it (the CRDs stay:
    other stacks on the node may use them)."""
    kube = node.kube()
    for kind in ("clusterrolebinding", "clusterrole"):
        for role in (manifests.OPERATOR, manifests.PROMETHEUS):
            kube.kubectl("delete", kind, f"{role}-{namespace}", "--ignore-not-found")
    kube.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m e2e.monitoring",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("up", "down"))
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the node's directory")
    parser.add_argument("--namespace", default="monitoring",
                        help="where the operator and Prometheus run (default: monitoring)")
    args = parser.parse_args()
    node = Node.load(args.dir.resolve())
    if args.command == "down":
        down(node, args.namespace)
        return
    stack = up(node, build(), namespace=args.namespace)
    print(f"# Prometheus {stack.namespace}/{stack.prometheus_pod} selects monitors and rules "
          f"labelled {manifests.SELECTOR_LABEL}={PROMETHEUS_NAME}; its UI:", file=sys.stderr)
    print(f"kubectl port-forward -n {stack.namespace} pod/{stack.prometheus_pod} "
          f"{PROMETHEUS_PORT}:{PROMETHEUS_PORT}")


if __name__ == "__main__":
    main()
