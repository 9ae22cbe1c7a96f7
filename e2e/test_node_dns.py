"""DNS inside the cluster: CoreDNS (a pod behind the kube-dns Service, reached through
kube-proxy's rules) resolves the `kubernetes` Service by its full and its short name, and
the address it gives answers: a pod reaches the API server through it."""

from __future__ import annotations

from .kube import Kube
from .node_config import API_SERVICE_IP
from .node_pods import last_json_line, pod, python_command, restricted_namespace, run_to_completion
from .node_state import Node

RESOLVE = """
import json, socket
report = {}
for name in ("kubernetes.default.svc.cluster.local", "kubernetes.default"):
    report[name] = sorted({info[4][0] for info in socket.getaddrinfo(name, 443, socket.AF_INET)})
with socket.create_connection(("kubernetes.default.svc.cluster.local", 443), timeout=10):
    report["connected"] = True
print(json.dumps(report))
"""


def test_cluster_names_resolve(node: Node, node_kube: Kube) -> None:
    namespace = restricted_namespace(node_kube)
    results = run_to_completion(node_kube, pod(
        "resolve", namespace, node.images["mqstore"], {"resolve": python_command(RESOLVE)}))
    code, log = results["resolve"]
    assert code == 0, log
    report = last_json_line(log)
    assert report["kubernetes.default.svc.cluster.local"] == [API_SERVICE_IP], report
    assert report["kubernetes.default"] == [API_SERVICE_IP], report
    assert report["connected"] is True
