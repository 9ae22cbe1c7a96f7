"""The Broker's NetworkPolicy, enforced for real: with kube-router's policy controller on
the node (e2e/node_netpol.py), a pod the policy does not select is refused and a selected
one served.

The policy is the operator's own builder's (`build_broker_network_policy`) for a Broker
whose clients are the pods labelled `role: client` of its namespace.  It guards a stand-in
server pod carrying the Broker pods' labels and answering on the writer's port (8081) and
the replication port (8084): what is tested is the policy and its enforcement; that the
operator applies it to a Broker is e2e/test_broker_security.py's part."""

from __future__ import annotations

import errno
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.operator import names
from mqstore.operator.network_policy import build_broker_network_policy
from mqstore.operator.spec import parse_spec

from . import node_netpol
from .kube import Kube, wait_for
from .node_pods import last_json_line, pod, python_command, restricted_namespace, run_to_completion
from .node_state import Node

BROKER = "np"
CLIENT_LABELS = {"role": "client"}
SERVER = """
import http.server, threading
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"served")
    def log_message(self, *args): pass
for port in (8081, 8084):
    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Answer)
    threading.Thread(target=server.serve_forever).start()
"""
CONNECT_TIMEOUT_S = 5
TRY_FOR_S = 15
"""How long a client keeps trying: the controller adds a new pod's address to the policy's
sets on the pod's watch event, so a selected client's first packets can still be refused.
A refusal counts only if every try within this window was refused."""
PROBE = f"TIMEOUT_S, TRY_FOR_S = {CONNECT_TIMEOUT_S}, {TRY_FOR_S}" + """
import json, sys, time, urllib.request
host, port = sys.argv[1], int(sys.argv[2])
deadline, tries = time.monotonic() + TRY_FOR_S, 0
while True:
    tries += 1
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/", timeout=TIMEOUT_S) as answer:
            outcome = {"served": answer.read().decode()}
    except OSError as error:
        reason = getattr(error, "reason", error)
        outcome = {"errno": getattr(reason, "errno", None), "error": str(reason)}
    if "served" in outcome or time.monotonic() > deadline:
        break
    time.sleep(1)
print(json.dumps({**outcome, "tries": tries}))
"""
REFUSALS = (errno.ECONNREFUSED, errno.EHOSTUNREACH, None)
"""kube-router REJECTs with an ICMP port unreachable (ECONNREFUSED); a timeout (None) would
mean a DROP, also a refusal."""


@pytest.fixture(scope="module")
def netpol(node: Node) -> Iterator[None]:
    bin_dir = node_netpol.build()
    node_netpol.start(node, bin_dir)
    try:
        yield
    finally:
        node_netpol.stop(node, bin_dir)


def _server(kube: Kube, namespace: str, image: str) -> str:
    """The stand-in broker pod; its address once it runs."""
    manifest = pod("stand-in", namespace, image, {"server": python_command(SERVER)})
    manifest["metadata"]["labels"] = names.selector_labels(BROKER)
    kube.kubectl("create", "-f", "-", stdin=json.dumps(manifest))
    running = wait_for("the stand-in server to run", lambda: (found := kube.must_get(
        "pod", "stand-in", namespace))["status"].get("phase") == "Running" and found)
    address: str = running["status"]["podIP"]
    return address


def _reach(kube: Kube, node: Node, namespace: str, labels: dict[str, str], address: str,
           port: int) -> dict[str, Any]:
    """One client pod's tries: {"served": ...} at the first success, else the last
    refusal {"errno": ..., "error": ...} (the number of tries left out)."""
    manifest = pod(f"client-{uuid.uuid4().hex[:6]}", namespace, node.images["mqstore"],
                   {"probe": ["python", "-c", PROBE, address, str(port)]})
    manifest["metadata"]["labels"] = labels
    code, log = run_to_completion(kube, manifest)["probe"]
    assert code == 0, log
    outcome = last_json_line(log)
    del outcome["tries"]
    return outcome


def _policy(namespace: str) -> dict[str, Any]:
    broker = {"metadata": {"name": BROKER, "namespace": namespace, "uid": "none"}}
    spec = parse_spec({"storage": {"size": "1Gi"},
                       "network": {"clients": [{"podSelector": {"matchLabels": CLIENT_LABELS}}]}})
    policy = build_broker_network_policy(broker, spec, operator_namespace=None)
    # No Broker owns it here: an owner that does not exist would have it garbage-collected.
    del policy["metadata"]["ownerReferences"]
    return policy


def test_an_unselected_pod_is_refused_and_a_selected_one_served(
        node: Node, node_kube: Kube, netpol: None, tmp_path: Path) -> None:
    kube = node_kube
    home, elsewhere = restricted_namespace(kube), restricted_namespace(kube)
    address = _server(kube, home, node.images["mqstore"])
    # Without a policy anyone gets in: what follows is the policy's doing.
    assert _reach(kube, node, elsewhere, {}, address, names.WRITER_PORT) == {"served": "served"}
    kube.apply(_policy(home))

    def refused(namespace: str, labels: dict[str, str], port: int) -> dict[str, Any] | None:
        outcome = _reach(kube, node, namespace, labels, address, port)
        return outcome if "served" not in outcome else None

    # The controller applies the policy on its watch event; a refusal says it has.
    outcome = wait_for("the policy to be enforced",
                       lambda: refused(elsewhere, CLIENT_LABELS, names.WRITER_PORT),
                       timeout_s=180)
    assert outcome["errno"] in REFUSALS, outcome
    selected = _reach(kube, node, home, CLIENT_LABELS, address, names.WRITER_PORT)
    assert selected == {"served": "served"}, "a client of the Broker's namespace is served"
    unselected = _reach(kube, node, home, {}, address, names.WRITER_PORT)
    assert unselected.get("errno") in REFUSALS and "served" not in unselected, unselected
    replication_by_client = _reach(kube, node, home, CLIENT_LABELS, address,
                                   names.REPLICATION_PORT)
    assert "served" not in replication_by_client, "replication is for the Broker's pods only"
    replication_by_peer = _reach(kube, node, home, names.selector_labels(BROKER), address,
                                 names.REPLICATION_PORT)
    assert replication_by_peer == {"served": "served"}, "a follower pod reaches its master"
