"""The e2e session: a real control plane (e2e/control_plane.py), the chart installed with
helm, and the operator as a real `kopf run` process logged in as the chart's
ServiceAccount (so the chart's RBAC is what it runs with).  The test_node_* tests use the
`node` fixture instead: a real single-node cluster (e2e/node.py) with a kubelet,
containerd and the mqstore image.

The binaries are built (or found in the cache) when the session starts, before any test's
timeout runs; the node's binaries and images too, when a collected test uses it, the
Prometheus Operator's (e2e/build-monitoring.sh) for the monitoring test, and kube-router
(e2e/build-netpol.sh) for the NetworkPolicy test.  A
missing tool fails the session, it never skips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .control_plane import (
    ControlPlane,
    build_binaries,
    free_port,
    start,
    stop,
    terminate,
    write_kubeconfig,
)
from .kube import Kube, wait_for
from .monitoring import MonitoringBuild
from .monitoring import build as build_monitoring
from .node import build as build_node
from .node import down, up
from .node_netpol import build as build_netpol
from .node_pods import restricted_namespace
from .node_release import install_release
from .node_state import Node

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "mqstore"
RELEASE = "mqstore"
OPERATOR_NAMESPACE = "mqstore-system"
RESYNC_INTERVAL_S = "2"
"""The operator's timer in these tests (30 s by default): status follows in seconds."""
TEST_IMAGE = "registry.invalid/mqstore:e2e"
"""Never pulled: there is no kubelet."""


def pytest_sessionstart(session: pytest.Session) -> None:
    started = time.monotonic()
    bin_dir = build_binaries()
    print(f"\ne2e: control plane binaries in {bin_dir} "
          f"({time.monotonic() - started:.1f} s to build or find)", file=sys.stderr)


def pytest_collection_finish(session: pytest.Session) -> None:
    if any("node" in getattr(item, "fixturenames", ()) for item in session.items):
        started = time.monotonic()
        build_node()
        print(f"\ne2e: node binaries and images built or found in "
              f"{time.monotonic() - started:.1f} s", file=sys.stderr)
    if any("netpol" in getattr(item, "fixturenames", ()) for item in session.items):
        started = time.monotonic()
        build_netpol()
        print(f"\ne2e: kube-router built or found in {time.monotonic() - started:.1f} s",
              file=sys.stderr)
    if any("monitoring_build" in getattr(item, "fixturenames", ()) for item in session.items):
        started = time.monotonic()
        build_monitoring()
        print(f"\ne2e: the Prometheus Operator and its images built or found in "
              f"{time.monotonic() - started:.1f} s", file=sys.stderr)


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A real node for the session: `up` before the first test that asks, `down` after
    the last, which must leave the machine as it found it."""
    directory = tmp_path_factory.mktemp("node")
    started = time.monotonic()
    running = up(directory)
    print(f"\ne2e: node Ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
    try:
        yield running
    finally:
        print("\n".join(down(directory)), file=sys.stderr)


@pytest.fixture(scope="session")
def node_kube(node: Node) -> Kube:
    return node.kube()


@pytest.fixture(scope="session")
def node_release(node: Node, node_kube: Kube) -> str:
    """The chart installed once on the node (e2e/node_release.py); its namespace."""
    return install_release(node, node_kube)


@pytest.fixture(scope="module")
def client_namespaces(node: Node, node_kube: Kube,
                      node_release: str) -> Iterator[tuple[str, str]]:
    """(a Broker's namespace, its RocketMQ client's), both restricted, on the node; deleted
    after the module's tests."""
    broker_namespace, client_namespace = (restricted_namespace(node_kube),
                                          restricted_namespace(node_kube))
    yield broker_namespace, client_namespace
    for namespace in (broker_namespace, client_namespace):
        node_kube.kubectl("delete", "namespace", namespace, "--wait=false")


@pytest.fixture(scope="session")
def monitoring_build() -> MonitoringBuild:
    """The Prometheus Operator's binaries and images (built at collection, found here)."""
    return build_monitoring()


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    directory = tmp_path_factory.mktemp("control-plane")
    started = start(directory)
    try:
        yield started
    finally:
        stop(directory)


@pytest.fixture(scope="session")
def kube(plane: ControlPlane) -> Kube:
    return Kube(bin_dir=plane.bin_dir, kubeconfig=plane.kubeconfig)


@pytest.fixture(scope="session")
def release(kube: Kube) -> dict[str, Any]:
    """`helm install` of the chart: CRD from crds/, RBAC, ServiceAccount, Deployment."""
    kube.helm("install", RELEASE, str(CHART), "--namespace", OPERATOR_NAMESPACE,
              "--create-namespace", "--set", "image.repository=registry.invalid/mqstore",
              "--set", "image.tag=e2e")
    wait_for("the Broker CRD to be established", lambda: any(
        c["type"] == "Established" and c["status"] == "True"
        for c in (kube.must_get("crd", "brokers.mqstore.io").get("status") or {})
        .get("conditions", [])))
    return kube.must_get("deployment", RELEASE, OPERATOR_NAMESPACE)


class OperatorProcess:
    """The chart's operator command, run here as a process (pods never run: no kubelet)."""

    def __init__(self, kube: Kube, deployment: dict[str, Any], directory: Path) -> None:
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        self.health_port, self.metrics_port = free_port(), free_port()
        self.argv = [str(Path(sys.executable).parent / "kopf"), *container["command"][1:]]
        self.argv = [f"--liveness=http://127.0.0.1:{self.health_port}/healthz"
                     if arg.startswith("--liveness=") else arg for arg in self.argv]
        # Values only: the downward API's (the operator's namespace) has no pod here.
        self.env = {**os.environ, **{v["name"]: v["value"] for v in container["env"]
                                     if "value" in v},
                    "MQSTORE_OPERATOR_RESYNC_INTERVAL_S": RESYNC_INTERVAL_S,
                    "MQSTORE_OPERATOR_METRICS_PORT": str(self.metrics_port)}
        self.env["KUBECONFIG"] = str(self._service_account_kubeconfig(
            kube, deployment, directory))
        self.log_path = directory / "operator.log"
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def _service_account_kubeconfig(kube: Kube, deployment: dict[str, Any],
                                    directory: Path) -> Path:
        account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        token = kube.kubectl("create", "token", account, "-n", OPERATOR_NAMESPACE,
                             "--duration=4h").stdout.strip()
        server = json.loads(kube.kubeconfig.read_text())["clusters"][0]["cluster"]
        path = directory / "operator-kubeconfig"
        write_kubeconfig(path, server=server["server"], token=token,
                         ca_path=Path(server["certificate-authority"]))
        return path

    def start(self) -> None:
        assert self.process is None
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.argv, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, cwd="/")
        wait_for("the operator's liveness endpoint", self._healthy)

    def _healthy(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"the operator exited {self.process.returncode}:\n"
                                 f"{self.log_tail()}")
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.health_port}/healthz", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def stop(self) -> int:
        assert self.process is not None
        code = terminate(self.process)
        self.process = None
        return code

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=5) as answer:
            text: str = answer.read().decode()
            return text

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="session")
def operator(kube: Kube, release: dict[str, Any],
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    running = OperatorProcess(kube, release, tmp_path_factory.mktemp("operator"))
    running.start()
    try:
        yield running
    finally:
        if running.process is not None:
            running.stop()
        forbidden = [line for line in running.log_path.read_text().splitlines()
                     if " 403" in line or "Forbidden" in line]
        assert not forbidden, "the chart's RBAC refused the operator:\n" + "\n".join(
            forbidden[:10])


@pytest.fixture
def namespace(kube: Kube, operator: OperatorProcess) -> Iterator[str]:
    """A fresh namespace per test, so tests share the operator and nothing else."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", name)
    yield name
    # Only the Brokers: there is no namespace controller to empty a deleted namespace.
    kube.kubectl("delete", "brokers", "--all", "-n", name, "--wait=false")


def broker_manifest(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"storage": {"size": "1Gi", "segmentSizeBytes": 67108864}}
    for key, value in spec.items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return {"apiVersion": "mqstore.io/v1alpha1", "kind": "Broker",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}
