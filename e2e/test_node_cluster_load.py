"""A RocketMQ cluster on the real node changed under an application at 1,000 msg/s: a roll
of every pod, then a third broker group added and removed again, while RocketMQ's Java
client keeps sending and consuming (e2e/node_load.py, from the node through the external
listeners, given only the name server's NodePort).

The Broker has two groups, each a sync master and one follower (`replicas: 2`,
`replication.mode: sync`): a send is acknowledged (SEND_OK) only once the follower has it.
Each test counts what was sent, acknowledged, answered with another status and received,
and the longest time the application went without an acknowledgement after a failed send
(`longestOutageMs`).  Nothing acknowledged may be lost, and no outage may outlast the
client's retry (RocketMQ's defaults: 2 retries within a 3,000 ms send timeout, each retry
to another group).

The roll: a flush change gives the pods a new config hash.  Each group's StatefulSet
replaces its follower first and its master last, the master only once its new follower is
Ready, which it is only once connected to the master and within
`replication.follower_ready_lag_bytes_max` of its end (services/writer, /readyz)."""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.remoting_clients.java_clients import CLIENT_5, JavaClients
from tests.remoting_clients.load_client import LoadRun, assert_nothing_lost, summary

from .kube import Kube, condition, wait_for
from .node_config import NODE_IP
from .node_go_client import is_ready, users_keys
from .node_load import start_outside
from .node_outside import connects
from .node_pods import restricted_namespace
from .node_state import Node

BROKER = "ld"
GROUPS = 2
REPLICAS = 2
NODE_PORT_BASE = 31000
"""Apart from e2e/test_node_external_listener.py's 30900, whose namespace may still be
going away."""
READY_TIMEOUT_S = 600.0
"""Two groups of two pods (each a follower copying its master) and a name server on a
loaded 2-core machine."""
ROLL_TIMEOUT_S = 900.0
"""Four pods replaced two at a time (one per group), each waiting for the one before to be
Ready."""
ACKS_BETWEEN = 3000
"""Acknowledgements the test waits for before and after each change: 3 s at full rate."""
ACKS_TIMEOUT_S = 180.0
DRAIN_TIMEOUT_S = 300.0
"""The operator's resync (30 s), the consumer's offset commit (5 s), the StatefulSet's
deletion and its pods' stop."""
pytestmark = pytest.mark.timeout(3600)


def load_manifest(namespace: str, *, groups: int) -> dict[str, Any]:
    return {"apiVersion": "mqstore.io/v1alpha1", "kind": "Broker",
            "metadata": {"name": BROKER, "namespace": namespace},
            "spec": {"groups": groups, "replicas": REPLICAS, "replication": {"mode": "sync"},
                     "nameServer": {"replicas": 1},
                     "storage": {"size": "1Gi", "segmentSizeBytes": 64 << 20},
                     "network": {"external": {"enabled": True, "host": NODE_IP,
                                              "nodePortBase": NODE_PORT_BASE}}}}


def group_name(group: int) -> str:
    return BROKER if group == 0 else f"{BROKER}-g{group}"


@pytest.fixture(scope="module")
def cluster(node: Node, node_kube: Kube, node_release: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The cluster Ready in a namespace of its own; RocketMQ's Java client built."""
    kube = node_kube
    namespace = restricted_namespace(kube)
    started = time.monotonic()
    try:
        clients = JavaClients.build(CLIENT_5)
        kube.apply(load_manifest(namespace, groups=GROUPS))
        wait_for("the cluster to be Ready", lambda: is_ready(kube, "broker", BROKER, namespace),
                 timeout_s=READY_TIMEOUT_S)
        work_dir = tmp_path_factory.mktemp("load")
        wait_for(f"{NODE_IP}:{NODE_PORT_BASE} to accept connections from the node",
                 functools.partial(connects, node, NODE_PORT_BASE, work_dir), timeout_s=120)
        yield {"namespace": namespace, "clients": clients, "work_dir": work_dir,
               "keys": users_keys(kube, BROKER, namespace),
               "ready_s": time.monotonic() - started}
    finally:
        kube.kubectl("delete", "namespace", namespace, "--wait=false")


def _start_load(node: Node, cluster: dict[str, Any], topic: str) -> LoadRun:
    return start_outside(node, cluster["clients"], namesrv=f"{NODE_IP}:{NODE_PORT_BASE}",
                         topic=topic, keys=cluster["keys"], work_dir=cluster["work_dir"] / topic)


def _pods(kube: Kube, namespace: str) -> dict[str, dict[str, Any]]:
    """The cluster's broker pods by name."""
    return {pod["metadata"]["name"]: pod
            for pod in kube.items("pod", namespace, f"mqstore.io/broker={BROKER}")
            if any(owner["kind"] == "StatefulSet"
                   for owner in pod["metadata"].get("ownerReferences", []))}


def _is_ready(pod: dict[str, Any]) -> bool:
    return (condition(pod, "Ready") or {}).get("status") == "True"


@dataclass
class RollWatch:
    """When each pod was first seen replaced (a uid not in `before`) and first seen Ready
    after that, in seconds from the watch's start: a follower is Ready again as soon as it
    has caught up, and may drop out of Ready while its master restarts, so its first Ready
    is what the master's replacement must come after."""
    before: dict[str, str]
    started: float = dataclasses.field(default_factory=time.monotonic)
    replaced_s: dict[str, float] = dataclasses.field(default_factory=dict)
    ready_s: dict[str, float] = dataclasses.field(default_factory=dict)

    def look(self, kube: Kube, namespace: str) -> bool:
        """One look at the pods; True once every pod is replaced and Ready and the Broker
        is Ready with nothing left to roll."""
        now_s = time.monotonic() - self.started
        pods = _pods(kube, namespace)
        for name, pod in pods.items():
            if pod["metadata"]["uid"] != self.before.get(name):
                self.replaced_s.setdefault(name, now_s)
                if _is_ready(pod):
                    self.ready_s.setdefault(name, now_s)
        if set(pods) != set(self.before) or set(self.ready_s) != set(self.before) or not all(
                _is_ready(pod) for pod in pods.values()):
            return False
        broker = kube.get("broker", BROKER, namespace)
        return bool((condition(broker, "Progressing") or {}).get("status") == "False"
                    and is_ready(kube, "broker", BROKER, namespace))


def test_a_roll_under_load_loses_nothing_acknowledged(
        node: Node, node_kube: Kube, cluster: dict[str, Any]) -> None:
    """A flush change rolls all four pods while the application sends at 1,000 msg/s: in
    each group the follower is replaced first and the master only once the new follower is
    Ready; every acknowledged message is received and no outage outlasts the retry."""
    kube, namespace = node_kube, cluster["namespace"]
    before = {name: pod["metadata"]["uid"] for name, pod in _pods(kube, namespace).items()}
    assert len(before) == GROUPS * REPLICAS, before
    started = time.monotonic()
    load = _start_load(node, cluster, "Rolled")
    try:
        load.wait_acked(ACKS_BETWEEN, timeout_s=ACKS_TIMEOUT_S)
        patched_at_s = load.progress()["elapsedS"]
        watch = RollWatch(before)
        kube.merge_patch("broker", BROKER, namespace, {"spec": {"flush": {"intervalMs": 250}}})
        wait_for("every pod replaced and Ready", functools.partial(
            watch.look, kube, namespace), timeout_s=ROLL_TIMEOUT_S)
        rolled_s = time.monotonic() - watch.started
        acked = load.progress()["acked"]
        load.wait_acked(acked + ACKS_BETWEEN, timeout_s=ACKS_TIMEOUT_S)
        report = load.stop()
    finally:
        load.kill()
    order = {name: (round(watch.replaced_s[name], 1), round(watch.ready_s[name], 1))
             for name in sorted(watch.replaced_s)}
    print(f"\ne2e cluster load: ready in {cluster['ready_s']:.1f} s; roll of "
          f"{len(order)} pods in {rolled_s:.1f} s (s replaced, s Ready): {json.dumps(order)}, "
          f"from second {patched_at_s:.1f} of the load; "
          f"load {summary(report, started)}")
    for group in range(GROUPS):
        master, follower = f"{group_name(group)}-0", f"{group_name(group)}-1"
        assert watch.replaced_s[follower] <= watch.replaced_s[master], order
        assert watch.ready_s[follower] <= watch.replaced_s[master], order
    assert_nothing_lost(report)


def _ready_groups(kube: Kube, namespace: str, groups: int) -> bool:
    status = (kube.get("broker", BROKER, namespace) or {}).get("status", {})
    return bool(status.get("readyGroups") == groups and len(status.get("groups", [])) == groups)


def test_a_group_added_and_removed_under_load_loses_nothing_acknowledged(
        node: Node, node_kube: Kube, cluster: dict[str, Any]) -> None:
    """groups 2 -> 3 -> 2 while the application sends at 1,000 msg/s and reads with one
    consumer group: the new group takes sends once it joins; removed, it is made read only
    (sends to it are refused, and the client's retry takes them to another group), drained
    by that consumer, then deleted.  Every acknowledged message is received, the new
    group's included."""
    kube, namespace = node_kube, cluster["namespace"]
    added = group_name(GROUPS)
    started = time.monotonic()
    load = _start_load(node, cluster, "Scaled")
    try:
        load.wait_acked(ACKS_BETWEEN, timeout_s=ACKS_TIMEOUT_S)
        scaling = time.monotonic()
        kube.apply(load_manifest(namespace, groups=GROUPS + 1))
        wait_for("three ready groups", lambda: _ready_groups(kube, namespace, GROUPS + 1),
                 timeout_s=READY_TIMEOUT_S)
        progress = load.wait_until(
            f"acknowledgements from {added}",
            lambda progress: progress.get("ackedByBroker", {}).get(added, 0) >= 100,
            timeout_s=ACKS_TIMEOUT_S)
        joined_s = time.monotonic() - scaling
        removing = time.monotonic()
        kube.apply(load_manifest(namespace, groups=GROUPS))
        wait_for(f"{added}'s StatefulSet deleted", lambda: kube.get(
            "statefulset", added, namespace) is None, timeout_s=DRAIN_TIMEOUT_S)
        wait_for("two groups", lambda: _ready_groups(kube, namespace, GROUPS),
                 timeout_s=READY_TIMEOUT_S)
        removed_s = time.monotonic() - removing
        acked = load.progress()["acked"]
        load.wait_acked(acked + ACKS_BETWEEN, timeout_s=ACKS_TIMEOUT_S)
        report = load.stop()
    finally:
        load.kill()
    print(f"\ne2e cluster load: groups 2 -> 3, {added} acknowledging after {joined_s:.1f} s "
          f"({json.dumps(progress)}); 3 -> 2 drained and deleted in {removed_s:.1f} s; "
          f"load {summary(report, started)}")
    assert kube.get("pvc", f"data-{added}-0", namespace) is not None
    assert report["ackedByBroker"].get(added, 0) > 0, report
    assert report["receivedByBroker"].get(added, 0) >= report["ackedByBroker"][added], report
    assert_nothing_lost(report)

