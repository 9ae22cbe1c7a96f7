"""The chart installed on the real node, once for the e2e session: `helm install` into a
namespace that enforces the "restricted" Pod Security Standard, with the node's mqstore
image (imported, never pulled), so the operator runs as a pod of the image with the chart's
RBAC.  Every node test that needs the operator shares this release (one operator watches
every namespace; a second release would fight it over the same Brokers).  A test that needs
more of the chart (the monitoring test's monitors) upgrades this release for its duration
with `upgraded_release`, and rolls it back after."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .kube import Kube
from .node_pods import restricted_namespace
from .node_state import Node

CHART = Path(__file__).resolve().parents[1] / "charts" / "mqstore"
RELEASE = "mqstore"
RESYNC_INTERVAL_S = 2
"""The operator's timer here (30 s by default): a Broker's status follows its pods within
seconds."""


def install_release(node: Node, kube: Kube) -> str:
    """Installs the chart and waits for the operator's Deployment; returns its namespace."""
    repository, tag = node.images["mqstore"].rsplit(":", 1)
    namespace = restricted_namespace(kube)
    kube.helm("install", RELEASE, str(CHART), "--namespace", namespace,
              "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
              "--set", "image.pullPolicy=Never",
              "--set", f"operator.resyncIntervalSeconds={RESYNC_INTERVAL_S}",
              "--wait", "--timeout", "120s")
    return namespace


@contextmanager
def upgraded_release(kube: Kube, namespace: str, values: list[str]) -> Iterator[None]:
    """`helm upgrade --reuse-values` of the shared release with `values` (helm --set
    arguments), then `helm rollback` to the revision before.  The operator's Deployment
    changes only if `values` touch it (the monitors do not: its pod keeps running)."""
    arguments = [item for value in values for item in ("--set", value)]
    kube.helm("upgrade", RELEASE, str(CHART), "--namespace", namespace, "--reuse-values",
              *arguments, "--wait", "--timeout", "120s")
    try:
        yield
    finally:
        kube.helm("rollback", RELEASE, "--namespace", namespace, "--wait", "--timeout", "120s")
