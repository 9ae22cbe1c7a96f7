"""The chart installed on the real node, once for the e2e session: `helm install` into a
namespace that enforces the "restricted" Pod Security Standard, with the node's mqstore
image (imported, never pulled), so the operator runs as a pod of the image with the chart's
RBAC.  Every node test that needs the operator shares this release (one operator watches
every namespace; a second release would fight it over the same Brokers)."""

from __future__ import annotations

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
