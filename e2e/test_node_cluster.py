"""A RocketMQ cluster on the real node: one Broker resource with two broker groups and its
name servers (docs/kubernetes.md, "Clusters: name servers and broker groups").

RocketMQ's Go client in a pod of another namespace is given only the name-server Service's
address.  Its producer routes a new topic by TBW102, which every group registers, so its
sends spread over both groups and each group creates the topic, as RocketMQ's brokers do
with auto-creation on; its push consumer rebalances over every group's queues and receives
each message once.  Then the name servers are scaled from one to three: every broker finds
the new ones through the headless Service on its next registration round, so each name
server lists both groups, and no broker pod is restarted or replaced.  A third group added
takes the cluster's topics; removed again, it is drained first: deleted only once a consumer
group has read what it held, its claim kept."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.remoting_clients.go_client import GoClient
from tests.remoting_clients.java_clients import json_lines

from .kube import Kube, condition, wait_for
from .node_admin import install_admin, mqadmin_in_pod
from .node_go_client import (
    CLIENT,
    assert_each_received_once,
    client_pod,
    copy_binary,
    exec_in_client,
    is_ready,
    users_keys,
)
from .node_release import RESYNC_INTERVAL_S
from .node_state import Node

BROKER = "cl"
GROUPS = 2
MESSAGES = 200
NAME_SERVERS_SCALED = 3
READY_TIMEOUT_S = 480.0
"""Two groups' pods (an init container and three containers each) and a name server on a
loaded 2-core machine."""
CLIENT_TIMEOUT_S = 240.0
REGISTERED_TIMEOUT_S = 150.0
"""A broker registers every 30 s (`remoting.register_interval_ms`) and resolves the
name-server Service again each round: a new name server hears from it within one round,
plus the pods' start."""
RAW_REMOTING = Path(__file__).parents[1] / "tests" / "remoting_clients" / "raw_remoting.py"
pytestmark = pytest.mark.timeout(1200)


def cluster_manifest(namespace: str, client_namespace: str, *,
                     name_servers: int) -> dict[str, Any]:
    peer = {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": client_namespace}}}
    return {"apiVersion": "mqstore.io/v1alpha1", "kind": "Broker",
            "metadata": {"name": BROKER, "namespace": namespace},
            "spec": {"groups": GROUPS, "nameServer": {"replicas": name_servers},
                     "storage": {"size": "1Gi", "segmentSizeBytes": 64 << 20},
                     "network": {"clients": [peer]}}}


@pytest.fixture(scope="module")
def cluster(node: Node, node_kube: Kube,
            client_namespaces: tuple[str, str]) -> dict[str, Any]:
    """The cluster Ready with one name server, the client pod up with the Go client in it."""
    kube = node_kube
    broker_namespace, client_namespace = client_namespaces
    started = time.monotonic()
    go = GoClient.build(static=True)
    kube.apply(cluster_manifest(broker_namespace, client_namespace, name_servers=1))
    kube.apply(client_pod(client_namespace, node.images["mqstore"]))
    wait_for("the cluster to be Ready", lambda: is_ready(kube, "broker", BROKER,
                                                       broker_namespace),
             timeout_s=READY_TIMEOUT_S)
    wait_for("the client pod to be ready", lambda: is_ready(kube, "pod", CLIENT, client_namespace),
             timeout_s=120)
    ready_s = time.monotonic() - started
    return {"binary": copy_binary(kube, client_namespace, go.binary), "ready_s": ready_s,
            "keys": users_keys(kube, BROKER, broker_namespace)}


def _produce_consume(kube: Kube, cluster: dict[str, Any],
                     client_namespaces: tuple[str, str],
                     topic: str, *options: str) -> dict[str, Any]:
    """The Go client's report: produce-consume of MESSAGES, or what `options` say."""
    broker_namespace, client_namespace = client_namespaces
    access_key, secret_key = cluster["keys"]
    output = exec_in_client(
        kube, client_namespace, cluster["binary"], "-namesrv",
        f"{BROKER}-namesrv.{broker_namespace}.svc:9876", "-topic", topic,
        "-count", str(MESSAGES), "-timeout-s", "120", "-access-key", access_key,
        "-secret-key", secret_key, *options, timeout_s=CLIENT_TIMEOUT_S)
    (report,) = list(json_lines(output))
    return report


def _assert_each_once_over_every_group(report: dict[str, Any]) -> None:
    assert_each_received_once(report, messages=MESSAGES, brokers={
        BROKER, *(f"{BROKER}-g{group}" for group in range(1, GROUPS))})


def test_a_client_given_the_name_server_uses_every_group(
        node_kube: Kube, cluster: dict[str, Any], client_namespaces: tuple[str, str]) -> None:
    """200 messages, each acknowledged, spread over both groups, each received once."""
    started = time.monotonic()
    report = _produce_consume(node_kube, cluster, client_namespaces, "Spread")
    print(f"\ne2e cluster: ready in {cluster['ready_s']:.1f} s; produce and consume "
          f"{time.monotonic() - started:.1f} s: {json.dumps(report)}")
    _assert_each_once_over_every_group(report)


def test_mqadmin_in_a_pod_sees_the_cluster(
        node_kube: Kube, cluster: dict[str, Any], client_namespaces: tuple[str, str]) -> None:
    """Apache RocketMQ's mqadmin 5.5.0 in the client pod (e2e/node_admin.py), given the name
    server's Service and signing with the admin account: `clusterList` lists both groups'
    masters at their headless names, `topicRoute` routes the first test's topic to both,
    and `consumerProgress` shows its consumer group on every queue of both, nothing left."""
    kube = node_kube
    broker_namespace, client_namespace = client_namespaces
    started = time.monotonic()
    install_admin(kube, client_namespace, cluster["keys"])
    installed_s = time.monotonic() - started
    namesrv = f"{BROKER}-namesrv.{broker_namespace}.svc:9876"
    groups = {BROKER, *(f"{BROKER}-g{group}" for group in range(1, GROUPS))}
    listed = mqadmin_in_pod(kube, client_namespace, "clusterList", namesrv).table()
    assert {row[1] for row in listed} == groups, listed
    assert {row[3] for row in listed} == {
        f"{group}-0.{group}-headless.{broker_namespace}.svc:9876" for group in groups}, listed
    route = mqadmin_in_pod(kube, client_namespace, "topicRoute", namesrv, "-t", "Spread")
    assert {name for name in groups if f'"brokerName":"{name}"' in route.output} == groups, \
        route.output
    progress = mqadmin_in_pod(kube, client_namespace, "consumerProgress", namesrv,
                              "-g", "go-Spread", "-t", "Spread")
    rows = [row for row in progress.table() if row and row[0] == "Spread"]
    print(f"\ne2e cluster: mqadmin unpacked in the pod in {installed_s:.1f} s; clusterList "
          f"{listed}; consumerProgress {rows}; all in {time.monotonic() - started:.1f} s")
    assert {row[1] for row in rows} == groups, progress.output
    assert progress.field("Consume Diff Total") == "0", progress.output


def test_scaling_the_name_servers_restarts_no_broker(
        node_kube: Kube, cluster: dict[str, Any], client_namespaces: tuple[str, str]) -> None:
    """1 -> 3 name servers: each lists both groups within a registration round, every broker
    pod is the same pod with the same restart counts, and clients still use both groups."""
    kube = node_kube
    broker_namespace, client_namespace = client_namespaces
    before = _broker_pods(kube, broker_namespace)
    assert len(before) == GROUPS, before
    started = time.monotonic()
    kube.apply(cluster_manifest(broker_namespace, client_namespace,
                                name_servers=NAME_SERVERS_SCALED))
    addresses = wait_for("three ready name servers", lambda: _name_server_addresses(
        kube, broker_namespace), timeout_s=READY_TIMEOUT_S)
    groups = {BROKER, *(f"{BROKER}-g{group}" for group in range(1, GROUPS))}
    listed = wait_for("every name server to list both groups", lambda: _every_lists(
        kube, client_namespace, addresses, groups), timeout_s=REGISTERED_TIMEOUT_S)
    registered_s = time.monotonic() - started
    assert _broker_pods(kube, broker_namespace) == before
    report = _produce_consume(kube, cluster, client_namespaces, "AfterScale")
    print(f"\ne2e cluster: name servers 1 -> {NAME_SERVERS_SCALED}, every one listing both "
          f"groups after {registered_s:.1f} s: {listed}; broker pods unchanged: {before}; "
          f"then {json.dumps(report)}")
    _assert_each_once_over_every_group(report)


def _broker_pods(kube: Kube, namespace: str) -> dict[str, tuple[str, int]]:
    """Every StatefulSet pod of the cluster: name -> (uid, restarts of all containers)."""
    pods = json.loads(kube.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)
    return {pod["metadata"]["name"]: (pod["metadata"]["uid"], sum(
                status.get("restartCount", 0)
                for status in pod["status"].get("containerStatuses", [])))
            for pod in pods["items"]
            if any(owner["kind"] == "StatefulSet"
                   for owner in pod["metadata"].get("ownerReferences", []))}


def _name_server_addresses(kube: Kube, namespace: str) -> list[str] | None:
    """The ready name-server pods' `ip:9876`, once there are three."""
    deployment = kube.get("deployment", f"{BROKER}-namesrv", namespace) or {}
    selector = deployment.get("spec", {}).get("selector", {}).get("matchLabels", {})
    if not selector or deployment.get("status", {}).get("readyReplicas") != \
            NAME_SERVERS_SCALED:
        return None
    text = ",".join(f"{key}={value}" for key, value in sorted(selector.items()))
    pods = json.loads(kube.kubectl("get", "pods", "-n", namespace, "-l", text,
                                   "-o", "json").stdout)["items"]
    addresses = sorted(f"{pod['status']['podIP']}:9876" for pod in pods
                       if pod["status"].get("podIP") and not pod["metadata"].get(
                           "deletionTimestamp"))
    return addresses if len(addresses) == NAME_SERVERS_SCALED else None


def _every_lists(kube: Kube, client_namespace: str, addresses: list[str],
                 groups: set[str]) -> dict[str, list[str]] | None:
    """{address: the broker names its cluster info lists}, once each lists every group."""
    listed = _listed(kube, client_namespace, addresses)
    return listed if all(set(names) >= groups for names in listed.values()) else None


def _listed(kube: Kube, client_namespace: str, addresses: list[str]) -> dict[str, list[str]]:
    """{address: the broker names its cluster info lists}."""
    script = RAW_REMOTING.read_text() + (
        "\nimport sys, re\n"
        "for address in sys.argv[1:]:\n"
        "    body = request(address, GET_BROKER_CLUSTER_INFO).body.decode()\n"
        "    print(json.dumps({address: sorted(set(re.findall("
        "r'\"brokerName\"\\s*:\\s*\"([^\"]+)\"', body)))}))\n")
    output = exec_in_client(kube, client_namespace, "python", "-c", script, *addresses)
    listed: dict[str, list[str]] = {}
    for line in json_lines(output):
        listed.update(line)
    return listed


def test_a_group_added_takes_the_clusters_topics_and_serves(
        node_kube: Kube, cluster: dict[str, Any], client_namespaces: tuple[str, str]) -> None:
    """groups 2 -> 3: the new group joins empty, so it takes the cluster's topics from the
    name server (services/notifier/remoting/cluster_topics.py) and every name server routes
    the first test's topic to all three groups; a new topic's messages then spread over the
    three and each is received once.  The first two groups' pods are not restarted."""
    kube = node_kube
    broker_namespace, client_namespace = client_namespaces
    before = _broker_pods(kube, broker_namespace)
    started = time.monotonic()
    manifest = cluster_manifest(broker_namespace, client_namespace,
                                name_servers=NAME_SERVERS_SCALED)
    manifest["spec"]["groups"] = GROUPS + 1
    kube.apply(manifest)
    wait_for("three ready groups", lambda: (kube.get("broker", BROKER, broker_namespace) or {})
             .get("status", {}).get("readyGroups") == GROUPS + 1, timeout_s=READY_TIMEOUT_S)
    groups = {BROKER, *(f"{BROKER}-g{group}" for group in range(1, GROUPS + 1))}
    addresses = _name_server_addresses(kube, broker_namespace)
    assert addresses is not None
    routed = wait_for("Spread routed to the three groups", lambda: _every_routes(
        kube, client_namespace, addresses, "Spread", groups), timeout_s=REGISTERED_TIMEOUT_S)
    joined_s = time.monotonic() - started
    after = _broker_pods(kube, broker_namespace)
    assert {name: after[name] for name in before} == before
    report = _produce_consume(kube, cluster, client_namespaces, "AfterScaleOut")
    print(f"\ne2e cluster: groups 2 -> 3, the first topic routed to all three after "
          f"{joined_s:.1f} s: {routed}; then {json.dumps(report)}")
    assert report["ok"], report
    assert (report["sent"], report["received"], report["duplicates"]) == (
        MESSAGES, MESSAGES, 0), report
    assert set(report["sentByBroker"]) == groups, report
    assert report["receivedByBroker"] == report["sentByBroker"], report


def _every_routes(kube: Kube, client_namespace: str, addresses: list[str], topic: str,
                  groups: set[str]) -> dict[str, list[str]] | None:
    """{address: the groups its route of `topic` names}, once each names every group."""
    script = RAW_REMOTING.read_text() + (
        "\nimport sys, re\n"
        "for address in sys.argv[2:]:\n"
        "    route = route_of(address, sys.argv[1]) or {}\n"
        "    print(json.dumps({address: sorted(data['brokerName'] for data in "
        "route.get('queueDatas', []))}))\n")
    output = exec_in_client(kube, client_namespace, "python", "-c", script, topic, *addresses)
    routed: dict[str, list[str]] = {}
    for line in json_lines(output):
        routed.update(line)
    return routed if all(set(names) >= groups for names in routed.values()) else None


DRAIN_TOPIC = "Drain"
DRAIN_TIMEOUT_S = 180.0
"""The consumer's commit (every 5 s, and at its shutdown), then the operator's next resync
(RESYNC_INTERVAL_S), then the StatefulSet's deletion and its pod's stop."""
DRAIN_HOLD_S = 5 * RESYNC_INTERVAL_S
"""Five passes of the operator: none of them may delete a group its consumers lag on."""


def _draining(kube: Kube, namespace: str) -> dict[str, Any] | None:
    """status.draining, once the Broker reports Progressing `Draining` with a lag above 0."""
    body = kube.get("broker", BROKER, namespace)
    found = condition(body, "Progressing") or {}
    draining = ((body or {}).get("status") or {}).get("draining") or {}
    if found.get("reason") != "Draining" or not (draining.get("lag") or 0) > 0:
        return None
    return {**draining, "message": found.get("message")}


def test_a_group_removed_is_drained_first_and_keeps_its_claims(
        node_kube: Kube, cluster: dict[str, Any], client_namespaces: tuple[str, str]) -> None:
    """groups 3 -> 2 while consumer group go-Drain has messages it has not read on cl-g2.

    go-Drain first reads the topic's first MESSAGES (corpus 0..199) to the end, so it has
    committed offsets on all three groups; then MESSAGES more (corpus 200..399) are sent and
    nobody reads them, so its lag on cl-g2 is exactly what was sent there.  Lowering groups
    makes cl-g2 read only and Draining, and cl-g2 stays past a resync; go-Drain then reads
    corpus 200..399, the share of cl-g2 included, each exactly once (one from 0..199 would be
    a redelivery: unexpected), and only then is cl-g2 deleted, its claim kept, and the name
    servers stop listing it.  A last produce-consume uses the two groups left."""
    kube = node_kube
    broker_namespace, client_namespace = client_namespaces
    # A tail past the client's 5 s offset persist: its one-way commit at shutdown can be
    # lost, and then cl-g2 would hold the primed share unread too.
    primed = _produce_consume(kube, cluster, client_namespaces, DRAIN_TOPIC, "-tail-ms", "6000")
    assert primed["ok"] and f"{BROKER}-g2" in primed["receivedByBroker"], primed
    backlog = _produce_consume(kube, cluster, client_namespaces, DRAIN_TOPIC,
                               "-mode", "produce", "-first", str(MESSAGES))
    assert backlog["ok"] and backlog["sentByBroker"].get(f"{BROKER}-g2", 0) > 0, backlog
    install_admin(kube, client_namespace, cluster["keys"])  # idempotent
    before = mqadmin_in_pod(kube, client_namespace, "consumerProgress",
                            f"{BROKER}-namesrv.{broker_namespace}.svc:9876",
                            "-g", f"go-{DRAIN_TOPIC}", "-t", DRAIN_TOPIC)
    print(f"\ne2e cluster: before the drain, consumerProgress {before.table()}")
    assert before.field("Consume Diff Total") == str(MESSAGES), before.output
    manifest = cluster_manifest(broker_namespace, client_namespace,
                                name_servers=NAME_SERVERS_SCALED)
    kube.apply(manifest)  # groups back to GROUPS (2)
    draining = wait_for("cl-g2 Draining with a lag", lambda: _draining(kube, broker_namespace),
                        timeout_s=DRAIN_TIMEOUT_S)
    assert draining["group"] == f"{BROKER}-g2", draining
    assert draining["lag"] >= backlog["sentByBroker"][f"{BROKER}-g2"], (draining, backlog)
    time.sleep(DRAIN_HOLD_S)
    assert _draining(kube, broker_namespace) is not None
    assert kube.get("statefulset", f"{BROKER}-g2", broker_namespace) is not None
    drained = _produce_consume(kube, cluster, client_namespaces, DRAIN_TOPIC, "-mode",
                               "consume", "-first", str(MESSAGES), "-group", f"go-{DRAIN_TOPIC}")
    print(f"\ne2e cluster: groups 3 -> 2 while draining {json.dumps(draining)}; backlog "
          f"{json.dumps(backlog)}; read {json.dumps(drained)}")
    assert drained["ok"], drained
    assert (drained["received"], drained["missingCount"], drained["duplicates"],
            drained["unexpected"], drained["mismatchCount"]) == (MESSAGES, 0, 0, 0, 0), drained
    assert drained["receivedByBroker"] == backlog["sentByBroker"], (drained, backlog)
    wait_for("cl-g2's StatefulSet deleted", lambda: kube.get(
        "statefulset", f"{BROKER}-g2", broker_namespace) is None, timeout_s=DRAIN_TIMEOUT_S)
    _assert_removed_and_kept(kube, broker_namespace, client_namespace)
    after = _produce_consume(kube, cluster, client_namespaces, "AfterDrain")
    _assert_each_once_over_every_group(after)


def _assert_removed_and_kept(kube: Kube, namespace: str, client_namespace: str) -> None:
    """cl-g2's claim is kept, its other objects are gone, the Broker shows two groups and
    no drain, and every name server lists only cl and cl-g1."""
    assert kube.get("pvc", f"data-{BROKER}-g2-0", namespace) is not None
    for kind, name in (("configmap", f"{BROKER}-g2-config"), ("service", f"{BROKER}-g2"),
                       ("service", f"{BROKER}-g2-headless"), ("pdb", f"{BROKER}-g2")):
        assert kube.get(kind, name, namespace) is None, (kind, name)
    wanted = [BROKER, f"{BROKER}-g1"]

    def two_groups_no_drain() -> dict[str, Any] | None:
        status: dict[str, Any] = (kube.get("broker", BROKER, namespace) or {}).get("status", {})
        names = [group["name"] for group in status.get("groups", [])]
        return status if names == wanted and not status.get("draining") else None

    status = wait_for("the Broker to report two groups and no drain", two_groups_no_drain,
                      timeout_s=120)
    assert (condition({"status": status}, "Progressing") or {}).get("reason") != "Draining"
    addresses = _name_server_addresses(kube, namespace)
    assert addresses is not None

    def only_two_listed() -> dict[str, list[str]] | None:
        found = _listed(kube, client_namespace, addresses)
        return found if all(names == wanted for names in found.values()) else None

    listed = wait_for("every name server to list only cl and cl-g1", only_two_listed,
                      timeout_s=REGISTERED_TIMEOUT_S)
    print(f"e2e cluster: after the drain the name servers list {listed}")
