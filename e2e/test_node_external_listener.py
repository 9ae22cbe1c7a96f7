"""A client outside the cluster network reaches a RocketMQ cluster on the real node through
its external listeners (docs/kubernetes.md, "Clients outside the cluster: external
listeners"): one Broker of two groups and a name server with `network.external` on the
node's address and NodePorts 30900 (the name-server entry), 30901 and 30917 (each group's
master).

RocketMQ's Go client (the program of tests/remoting_clients/go/) runs on the node itself,
not in a pod: in the node's network namespace (`ip netns exec`), with the host's files and
no cluster resolver, given `<NODE_IP>:30900` as its name server and nothing else.  A pod's
address or a `*.svc` name in a route would leave it stranded, so every message sent and
received proves the routes it was given named the NodePorts: the name server's external
listener answers with the external address each group registered, and each master's
external listener takes the sends and pulls.  Its producer spreads over both groups
(routes by TBW102, as in e2e/test_node_cluster.py) and its push consumer receives each
message once.

What the node must do for this (an assumption the test makes, true of the e2e node,
e2e/node_config.py): kube-proxy in iptables mode turns a connection the node opens to its
own address's NodePort into one to the pod (the nat OUTPUT chain sends traffic for a local
address to KUBE-NODEPORTS; the node's address is on the namespace's `lo`, a local
address), masquerades it onto the pod bridge, and the default NodePort range
(30000-32767) is the API server's."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.remoting_clients.go_client import GoClient
from tests.remoting_clients.java_clients import json_lines

from .kube import Kube, wait_for
from .node_config import NODE_IP
from .node_go_client import assert_each_received_once, is_ready, users_keys
from .node_outside import connects, on_node
from .node_pods import restricted_namespace
from .node_state import Node

BROKER = "ext"
GROUPS = 2
NODE_PORT_BASE = 30900
SERVICES = {f"{BROKER}-external": NODE_PORT_BASE, f"{BROKER}-0-external": NODE_PORT_BASE + 1,
            f"{BROKER}-g1-0-external": NODE_PORT_BASE + 1 + 16}
"""The entry and each group's one pod (replicas 1): base, base + 1 + 16 g (docs)."""
MESSAGES = 200
READY_TIMEOUT_S = 480.0
"""Two groups' pods (an init container and three containers each) and a name server on a
loaded 2-core machine."""
CONNECT_TIMEOUT_S = 60.0
"""kube-proxy writes a Service's rules within seconds of its endpoints changing."""
CLIENT_TIMEOUT_S = 240.0
"""The Go program's own wait for its messages is 120 s; sends and start-up come before."""
pytestmark = pytest.mark.timeout(1200)
"""The first test also brings the node up, installs the chart and builds the Go client."""


def broker_manifest(namespace: str) -> dict[str, Any]:
    """Two groups, one name server, external listeners on the node's address;
    `network.clients` at its default (this namespace's pods): the client outside is let in
    by the external rule alone."""
    return {"apiVersion": "mqstore.io/v1alpha1", "kind": "Broker",
            "metadata": {"name": BROKER, "namespace": namespace},
            "spec": {"groups": GROUPS, "nameServer": {"replicas": 1},
                     "storage": {"size": "1Gi", "segmentSizeBytes": 64 << 20},
                     "network": {"external": {"enabled": True, "host": NODE_IP,
                                              "nodePortBase": NODE_PORT_BASE}}}}


@pytest.fixture(scope="module")
def outside(node: Node, node_kube: Kube, node_release: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The cluster Ready in a namespace of its own, the Go client built on the host."""
    kube = node_kube
    namespace = restricted_namespace(kube)
    started = time.monotonic()
    try:
        go = GoClient.build(static=True)
        kube.apply(broker_manifest(namespace))
        wait_for("the cluster to be Ready",
                 lambda: is_ready(kube, "broker", BROKER, namespace), timeout_s=READY_TIMEOUT_S)
        yield {"namespace": namespace, "binary": go.binary,
               "keys": users_keys(kube, BROKER, namespace),
               "work_dir": tmp_path_factory.mktemp("outside"),
               "ready_s": time.monotonic() - started}
    finally:
        kube.kubectl("delete", "namespace", namespace, "--wait=false")


def test_the_nodeport_services_and_the_status_name_the_node(
        node_kube: Kube, outside: dict[str, Any]) -> None:
    """One NodePort Service per broker pod and the entry, numbered from the base, listed by
    their label; status.external gives clients their name server."""
    namespace = outside["namespace"]
    services = node_kube.items("service", namespace, f"mqstore.io/external={BROKER}")
    found = {s["metadata"]["name"]: (s["spec"]["type"], s["spec"]["ports"][0]["nodePort"])
             for s in services}
    assert found == {name: ("NodePort", port) for name, port in SERVICES.items()}, found
    status = node_kube.must_get("broker", BROKER, namespace)["status"]
    assert status["external"] == {"nameServer": f"{NODE_IP}:{NODE_PORT_BASE}"}, status


def test_a_client_outside_the_cluster_uses_every_group_through_the_nodeports(
        node: Node, outside: dict[str, Any]) -> None:
    """200 messages from the node's own namespace, each acknowledged, spread over both
    groups, each received once: name server, sends and pulls all through NodePorts."""
    work_dir: Path = outside["work_dir"]
    for name, port in SERVICES.items():
        wait_for(f"{NODE_IP}:{port} ({name}) to accept connections from the node",
                 functools.partial(connects, node, port, work_dir),
                 timeout_s=CONNECT_TIMEOUT_S)
    access_key, secret_key = outside["keys"]
    started = time.monotonic()
    done = on_node(node, str(outside["binary"]), "-namesrv", f"{NODE_IP}:{NODE_PORT_BASE}",
                   "-topic", "Outside", "-count", str(MESSAGES), "-timeout-s", "120",
                   "-access-key", access_key, "-secret-key", secret_key,
                   cwd=work_dir, timeout_s=CLIENT_TIMEOUT_S)
    (report,) = list(json_lines(done.stdout))
    print(f"\ne2e external listener: ready in {outside['ready_s']:.1f} s; produce and "
          f"consume from the node {time.monotonic() - started:.1f} s: {json.dumps(report)}")
    assert_each_received_once(report, messages=MESSAGES, brokers={
        BROKER, *(f"{BROKER}-g{group}" for group in range(1, GROUPS))})
