"""NetworkPolicy enforcement on the real e2e node: kube-router's network-policy controller
alone (no routing, no service proxy, no CNI of its own), beside the bridge plugin, which
enforces nothing by itself.

It runs in the node's network and mount namespaces like the other daemons, logged in as a
ServiceAccount with only what its informers read, and writes iptables chains and ipsets in
the node's namespace only (both are per network namespace: nothing reaches the host's).
Each pod a policy selects gets a chain that REJECTs what no rule admits.  The node's
isolation holds with it running: the mangle table's FORWARD drop (which kube-router never
touches) stays first, and the namespace still has no interface or route out; kube-router
moves its own jump to the top of the filter table's FORWARD on each sync, so `stop` removes
its rules (`--cleanup-config`) and puts the isolation jump back first for the tests after.

Started by a test that needs it (`start`), not by `up`: every other node test runs, as
before, on a network that admits everything."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from . import node_isolation
from .node_config import API_PORT, NODE_IP, NODE_NAME, SERVICE_CIDR, kubeconfig, write_json
from .node_start import ROOT, _http_ok, _in_netns, _spawn, _wait
from .node_state import Node, NodeError, alive

DAEMON = "kube-router"
ACCOUNT = "kube-router"
ACCOUNT_NAMESPACE = "kube-system"
HEALTH_PORT = 20244
"""kube-router's own default, on the node namespace's addresses only."""
SYNC_PERIOD = "30s"
"""Full resync of the chains (events apply changes at once; this only repairs drift)."""
STOP_TIMEOUT_S = 15.0
READS = [("", ["nodes", "pods", "namespaces", "services", "endpoints"]),
         ("networking.k8s.io", ["networkpolicies"]),
         ("discovery.k8s.io", ["endpointslices"])]
"""What its informers list and watch (it starts all seven, whatever runs)."""


def build() -> Path:
    """e2e/build-netpol.sh: the bin directory holding kube-router (built or found)."""
    done = subprocess.run(["bash", str(ROOT / "e2e" / "build-netpol.sh")], check=False,
                          stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise NodeError(f"e2e/build-netpol.sh failed with exit code {done.returncode}")
    return Path(done.stdout.strip().splitlines()[-1])


def rbac() -> list[dict[str, Any]]:
    rules = [{"apiGroups": [group], "resources": resources, "verbs": ["get", "list", "watch"]}
             for group, resources in READS]
    return [{"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": ACCOUNT, "namespace": ACCOUNT_NAMESPACE}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "mqstore-e2e:kube-router"}, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "mqstore-e2e:kube-router"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": "mqstore-e2e:kube-router"},
             "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT,
                           "namespace": ACCOUNT_NAMESPACE}]}]


def argv(bin_dir: Path, kubeconfig_path: Path) -> list[str]:
    return [str(bin_dir / "kube-router"), f"--kubeconfig={kubeconfig_path}",
            "--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
            "--enable-ipv4=true", "--enable-ipv6=false", f"--hostname-override={NODE_NAME}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--metrics-port=0",
            f"--health-port={HEALTH_PORT}", f"--iptables-sync-period={SYNC_PERIOD}"]


def start(node: Node, bin_dir: Path) -> None:
    """kube-router as one more daemon of the node (so `down` ends it if `stop` never ran);
    returns once its health endpoint answers, i.e. its first sync is done."""
    kube = node.kube()
    for manifest in rbac():
        kube.apply(manifest)
    token = kube.kubectl("create", "token", ACCOUNT, "-n", ACCOUNT_NAMESPACE,
                         "--duration=4h").stdout.strip()
    config = write_json(node.directory / "kube-router.kubeconfig", kubeconfig(
        server=f"https://{NODE_IP}:{API_PORT}", token=token,
        ca_path=node.directory / "pki" / "ca.crt"))
    _spawn(node, DAEMON, argv(bin_dir, config))
    _wait(node, DAEMON, lambda: _in_netns(node, lambda: _http_ok(
        f"http://127.0.0.1:{HEALTH_PORT}/healthz")))


def stop(node: Node, bin_dir: Path) -> None:
    """Ends kube-router, removes its chains and ipsets, and puts the isolation jump first."""
    process = node.processes.pop(DAEMON, None)
    node.save()
    if process is not None and alive(process["pid"]):
        os.kill(process["pid"], signal.SIGTERM)
        # Not our child if another process (`python -m e2e.node`) started it.
        with contextlib.suppress(ChildProcessError):
            os.waitpid(process["pid"], 0)
    node_isolation.in_netns(node.netns, str(bin_dir / "kube-router"), "--cleanup-config",
                            check=False)
    node_isolation.put_isolation_first(node.netns)
