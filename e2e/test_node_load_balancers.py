"""External listeners behind load balancers (`network.external.type: LoadBalancer`,
operator/external.py) on the real node: a Broker of two groups and a name server, a
LoadBalancer Service per broker pod and one for the name servers.

The node has no cloud, so the test plays the load balancer controller
(e2e/node_load_balancers.py): it gives each Service an address of 10.85.1.0/24 on the node
and writes it into the Service's status, and kube-proxy routes it.  Until every Service of
a group has an address the operator holds the group (no ConfigMap, no pods: the config
file lists the addresses the pods advertise) and says so, Progressing
`WaitingForLoadBalancers`; once they have, the groups start and each pod advertises its own
load balancer.  RocketMQ's Go client then runs on the node outside every pod (as in
e2e/test_node_external_listener.py), given only `status.external.nameServer`, the name
servers' load balancer: every message sent and received went through the addresses the
controller gave."""

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
from .node_go_client import assert_each_received_once, is_ready, users_keys
from .node_load_balancers import LoadBalancerController
from .node_outside import connects, on_node
from .node_pods import restricted_namespace
from .node_state import Node

BROKER = "lbx"
GROUPS = 2
LISTENER_PORT = 9877
SERVICES = (f"{BROKER}-external", f"{BROKER}-0-external", f"{BROKER}-g1-0-external")
"""The name servers' entry and each group's one pod (replicas 1)."""
MESSAGES = 200
WAITING_TIMEOUT_S = 120.0
"""The operator's first passes: the name servers, then each group's Services."""
READY_TIMEOUT_S = 480.0
CONNECT_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_S = 240.0
pytestmark = pytest.mark.timeout(1200)


def broker_manifest(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "mqstore.io/v1alpha1", "kind": "Broker",
            "metadata": {"name": BROKER, "namespace": namespace},
            "spec": {"groups": GROUPS, "nameServer": {"replicas": 1},
                     "storage": {"size": "1Gi", "segmentSizeBytes": 64 << 20},
                     "network": {"external": {"enabled": True, "type": "LoadBalancer"}}}}


def _progressing(kube: Kube, namespace: str) -> dict[str, Any]:
    conditions = (kube.must_get("broker", BROKER, namespace).get("status") or {}).get(
        "conditions") or []
    return next((c for c in conditions if c["type"] == "Progressing"), {})


@pytest.fixture(scope="module")
def balanced(node: Node, node_kube: Kube, node_release: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The Broker held for its load balancers, then given them and Ready."""
    kube = node_kube
    namespace = restricted_namespace(kube)
    controller = LoadBalancerController(node, kube, namespace)
    started = time.monotonic()
    try:
        go = GoClient.build(static=True)
        kube.apply(broker_manifest(namespace))
        waiting = wait_for("the Broker to wait for its load balancers", lambda: (
            progressing if (progressing := _progressing(kube, namespace)).get("reason") ==
            "WaitingForLoadBalancers" else None), timeout_s=WAITING_TIMEOUT_S)
        held = kube.items("statefulset", namespace, f"mqstore.io/broker={BROKER}")
        given_at = time.monotonic()

        def ready() -> bool:
            controller.pass_once()
            return is_ready(kube, "broker", BROKER, namespace)

        wait_for("the cluster to be Ready behind its load balancers", ready,
                 timeout_s=READY_TIMEOUT_S)
        yield {"namespace": namespace, "binary": go.binary, "waiting": waiting, "held": held,
               "given": dict(controller.given), "keys": users_keys(kube, BROKER, namespace),
               "work_dir": tmp_path_factory.mktemp("balanced"),
               "ready_s": time.monotonic() - given_at, "waited_s": given_at - started}
    finally:
        kube.kubectl("delete", "namespace", namespace, "--wait=false")
        controller.close()


def test_the_groups_wait_for_their_load_balancers_then_advertise_them(
        node_kube: Kube, balanced: dict[str, Any]) -> None:
    """No group was configured before its Services had addresses; then one LoadBalancer
    Service per pod and the entry, each with the address given, no NodePort, and the
    status gives clients the entry's."""
    assert "no address from the load balancer controller" in balanced["waiting"]["message"]
    assert balanced["held"] == [], "no StatefulSet before the addresses"
    namespace, given = balanced["namespace"], balanced["given"]
    assert set(given) == set(SERVICES), given
    services = node_kube.items("service", namespace, f"mqstore.io/external={BROKER}")
    found = {s["metadata"]["name"]: (s["spec"]["type"], "nodePort" in s["spec"]["ports"][0],
                                     s["status"]["loadBalancer"]["ingress"][0]["ip"])
             for s in services}
    assert found == {name: ("LoadBalancer", False, given[name]) for name in SERVICES}, found
    status = node_kube.must_get("broker", BROKER, namespace)["status"]
    assert status["external"] == {
        "nameServer": f"{given[f'{BROKER}-external']}:{LISTENER_PORT}"}, status


def test_a_client_outside_the_cluster_uses_every_group_through_the_load_balancers(
        node: Node, balanced: dict[str, Any]) -> None:
    work_dir: Path = balanced["work_dir"]
    for name, address in balanced["given"].items():
        wait_for(f"{address}:{LISTENER_PORT} ({name}) to accept connections from the node",
                 functools.partial(connects, node, LISTENER_PORT, work_dir, host=address),
                 timeout_s=CONNECT_TIMEOUT_S)
    access_key, secret_key = balanced["keys"]
    entry = f"{balanced['given'][f'{BROKER}-external']}:{LISTENER_PORT}"
    started = time.monotonic()
    done = on_node(node, str(balanced["binary"]), "-namesrv", entry,
                   "-topic", "Balanced", "-count", str(MESSAGES), "-timeout-s", "120",
                   "-access-key", access_key, "-secret-key", secret_key,
                   cwd=work_dir, timeout_s=CLIENT_TIMEOUT_S)
    (report,) = list(json_lines(done.stdout))
    print(f"\ne2e load balancers: held {balanced['waited_s']:.1f} s for addresses, then "
          f"ready in {balanced['ready_s']:.1f} s; produce and consume from the node through "
          f"{entry} {time.monotonic() - started:.1f} s: {json.dumps(report)}")
    assert_each_received_once(report, messages=MESSAGES, brokers={
        BROKER, *(f"{BROKER}-g{group}" for group in range(1, GROUPS))})
