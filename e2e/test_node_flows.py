"""Every user flow of a Broker on the real node, in order, on one Broker (the chart's
example, `kubectl apply`'d as a user would): it runs under the restricted Pod Security
Standard, serves producers and consumers through its Service, grows to two replicas with a
sync master, rolls on a flush change, survives kill -9 of its master pod and of a single
container and the deletion of a pod, and when deleted leaves its claims behind.

After every disruption each message a writer acknowledged (PUT_OK) so far is read back,
at its queue offset with its body and commit log position, from the master (through the
Service) and from the follower (through its own pod's notifier).  The tests share the
Broker and run in this file's order; each one's docstring says what it adds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from .kube import Kube, condition, wait_for
from .node_addons import STORAGE_CLASS
from .node_client import ClientPod
from .node_crash import kill_containers, wait_restarted
from .node_flow import COLUMNS, NAME, NOTIFIER, WRITER, Flow, uids
from .node_pods import MQSTORE_UID, RESTRICTED_CONTAINER, restricted_namespace
from .node_release import CHART
from .node_state import Node

EXAMPLE = CHART / "examples" / "broker.yaml"
SERVICES = ("writer", "indexer", "notifier")
ACKS_DURING_S = 180.0
"""How long a running producer may take to be acknowledged again after a disruption."""
pytestmark = pytest.mark.timeout(900)
"""Above the suite's 300 s: a roll of two pods may take ROLL_TIMEOUT_S (node_flow.py), and the
first test also brings the node up and installs the chart."""


@pytest.fixture(scope="module")
def flow(node: Node, node_kube: Kube, node_release: str,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    namespace = restricted_namespace(node_kube)
    client = ClientPod(node_kube, namespace, node.images["mqstore"])
    yield Flow(node, node_kube, namespace, client, tmp_path_factory.mktemp("flows"))
    node_kube.kubectl("delete", "namespace", namespace, "--wait=false")


def _refused_pod(kube: Kube, namespace: str, image: str) -> str:
    """The API server's answer to a pod that runs as root with a writable root filesystem."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "root", "namespace": namespace},
           "spec": {"containers": [{"name": "root", "image": image, "command": ["true"]}]}}
    done = kube.kubectl("apply", "--dry-run=server", "-f", "-", stdin=json.dumps(pod),
                        check=False)
    assert done.returncode != 0, f"a root pod was admitted in {namespace}"
    return done.stderr


def test_the_example_broker_runs_under_the_restricted_standard(
        flow: Flow, node_release: str) -> None:
    """`kubectl apply` of the chart's example: the real API server admits the operator's and
    the broker's pods in namespaces that enforce "restricted" (and refuses a root pod
    there); the init container prepared the first segment on the provisioned claim before
    the three containers started; `kubectl get brokers` shows it ready."""
    kube, namespace = flow.kube, flow.namespace
    kube.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
    flow.wait_ready()
    row = flow.wait_listed("True", 1, 1)
    assert row[COLUMNS.index("GROUPS"):COLUMNS.index("STORAGE") + 1] == ["1", "1", "20Gi"], row

    for where in (namespace, node_release):
        labels = kube.must_get("namespace", where)["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
        assert 'violates PodSecurity "restricted:latest"' in _refused_pod(
            kube, where, flow.node.images["mqstore"])
    operator = kube.items("pods", node_release)
    assert [p["status"]["phase"] for p in operator] == ["Running"], operator

    pod = flow.pods()[f"{NAME}-0"]
    assert {s["name"]: s["ready"] for s in pod["status"]["containerStatuses"]} == {
        service: True for service in SERVICES}
    for container in pod["spec"]["containers"]:
        assert container["securityContext"] == RESTRICTED_CONTAINER
    init = pod["status"]["initContainerStatuses"][0]
    assert (init["name"], init["state"]["terminated"]["exitCode"]) == ("preallocate", 0)
    log = kube.kubectl("logs", f"{NAME}-0", "-n", namespace, "-c", "preallocate").stdout
    segment_size = yaml.safe_load(EXAMPLE.read_text())["spec"]["storage"]["segmentSizeBytes"]
    assert f"/data/commitlog/00000000000000000000: {segment_size} bytes prepared" in log, log

    claim = kube.must_get("pvc", f"data-{NAME}-0", namespace)
    assert (claim["status"]["phase"], claim["spec"]["storageClassName"]) == (
        "Bound", STORAGE_CLASS)
    volume = kube.must_get("pv", claim["spec"]["volumeName"])
    first = Path(volume["spec"]["local"]["path"]) / "commitlog" / "00000000000000000000"
    assert first.is_relative_to(flow.node.directory / "volumes")
    assert first.stat().st_size == segment_size
    assert first.stat().st_uid == MQSTORE_UID


def test_produce_through_the_service_and_consume_every_message(flow: Flow) -> None:
    """A client pod produces through the Broker's Service (DNS, kube-proxy, pod 0's writer)
    and a consumer group polls every acknowledged message back through the same Service,
    each at the queue offset its PUT_OK named; the group's commit moves past all of them.
    The Broker checks users (the operator generated its users Secret): unsigned sends are
    refused and write nothing; signed as the Secret's admin, every send is acknowledged."""
    unsigned = flow.client.produce(f"{flow.service}:{WRITER}", "Orders", 3)
    assert unsigned.outcomes == {"UNAUTHORIZED": 3}, unsigned.outcomes
    flow.client.sign_as(*flow.users_keys())
    produced = flow.client.produce(f"{flow.service}:{WRITER}", "Orders", 200)
    assert produced.outcomes == {"PUT_OK": 200}, produced.outcomes
    acks = flow.record("Orders", produced)
    consumed = flow.client.consume(f"{flow.service}:{NOTIFIER}", "billing", "Orders", 200)
    assert consumed["received"] == {a.body: [a.queue_id, a.queue_offset] for a in acks}
    ends: dict[str, int] = {}
    for ack in acks:
        ends[str(ack.queue_id)] = max(ends.get(str(ack.queue_id), 0), ack.queue_offset + 1)
    assert consumed["committed"] == ends


def test_two_replicas_with_a_sync_master_put_every_ack_on_the_follower(flow: Flow) -> None:
    """`replicas: 2` and `replication.mode: sync`: pod 1 starts as a follower of pod 0 and
    copies the master's whole log, and from then on every PUT_OK is on the follower, read
    through the follower's own notifier."""
    before = uids(flow.pods())
    flow.kube.merge_patch("broker", NAME, flow.namespace,
                          {"spec": {"replicas": 2, "replication": {"mode": "sync"}}})
    flow.wait_rolled(before)
    flow.wait_listed("True", 2, 2)
    # `status if ... else None`, not `... and status`: an empty list of followers is not
    # None, so wait_for would return it.
    replication = wait_for("the sync master to have its follower", lambda: status if (
        status := flow.client.get(f"{flow.pod_url(0, WRITER)}/v1/replication")).get(
        "followers") else None)
    assert replication["role"] == "sync_master", replication
    follower = wait_for("the follower's writer", lambda: status if (
        status := flow.client.get(f"{flow.pod_url(1, WRITER)}/v1/replication")).get(
        "connected") else None)
    assert follower["role"] == "follower", follower
    assert follower["master"] == f"{NAME}-0.{NAME}-headless.{flow.namespace}.svc:8084"

    produced = flow.client.produce(f"{flow.service}:{WRITER}", "Payments", 200)
    flow.record("Payments", produced)
    flow.assert_nothing_lost()


def test_a_flush_change_rolls_the_pods_and_loses_no_acknowledged_message(flow: Flow) -> None:
    """A flush change while a producer runs: a new config hash on the pod template, so the
    StatefulSet replaces both pods one at a time (the follower first) and the Broker
    reports the roll; every message acknowledged before, during and after is still there."""
    before = uids(flow.pods())
    old_hash = flow.broker()["status"]["configHash"]
    producing = flow.client.start_producing(f"{flow.service}:{WRITER}", "Rolling",
                                            flow.directory / "rolling.log")
    wait_for("acknowledgements before the change", lambda: producing.acks_so_far() >= 20)
    flow.kube.merge_patch("broker", NAME, flow.namespace, {"spec": {"flush": {"mode": "sync"}}})
    wait_for("Progressing RollingUpdate", lambda: (condition(
        flow.broker(), "Progressing") or {}).get("reason") == "RollingUpdate")
    flow.wait_rolled(before)
    flow.wait_ready()
    # Ready can be True before the operator's next pass has seen the roll end.
    wait_for("the Broker to report the roll done", lambda: (condition(
        flow.broker(), "Progressing") or {}).get("status") == "False")
    acked = producing.acks_so_far()
    wait_for("acknowledgements after the roll", lambda: producing.acks_so_far() >= acked + 20,
             timeout_s=ACKS_DURING_S)
    flow.record("Rolling", producing.stop())

    broker = flow.broker()
    assert broker["status"]["configHash"] != old_hash
    config = flow.kube.must_get("configmap", f"{NAME}-config", flow.namespace)
    assert yaml.safe_load(config["data"]["mqstore.yaml"])["store"]["flush_mode"] == "sync"
    # Under the producer a follower may leave Ready for a moment (more than
    # replication.follower_ready_lag_bytes_max behind), which the Broker reports as
    # Progressing; with the producer stopped it settles.
    wait_for("the Broker settled after the producer stopped", lambda: (condition(
        flow.broker(), "Progressing") or {}).get("status") == "False")
    flow.assert_nothing_lost()


def test_kill_9_of_the_master_pod_loses_no_acknowledged_message(flow: Flow) -> None:
    """Every process of the master pod is killed at once (kill -9 of its three containers)
    while a producer runs: the Broker goes not ready (its Ready condition changes), the kubelet
    restarts the containers on the same volume, and every acknowledged message is on the
    restarted master and on the follower."""
    producing = flow.client.start_producing(f"{flow.service}:{WRITER}", "Crash",
                                            flow.directory / "crash.log")
    wait_for("acknowledgements before the kill", lambda: producing.acks_so_far() >= 20)
    ready_since = (condition(flow.broker(), "Ready") or {}).get("lastTransitionTime")
    killed = kill_containers(flow.node, flow.kube, flow.namespace, f"{NAME}-0", SERVICES)
    wait_restarted(flow.kube, flow.namespace, f"{NAME}-0", killed)
    # The Broker went not ready and back: its Ready condition is True with a new transition
    # time.  (Polling `kubectl get brokers` for "False 2 1" could miss a short window.)
    wait_for("the Broker's Ready condition to go False and back to True", lambda: (
        (ready := condition(flow.broker(), "Ready") or {}).get("status") == "True"
        and ready.get("lastTransitionTime") != ready_since), timeout_s=300)
    flow.wait_listed("True", 2, 2)
    acked = producing.acks_so_far()
    wait_for("acknowledgements after the restart",
             lambda: producing.acks_so_far() >= acked + 20, timeout_s=ACKS_DURING_S)
    flow.record("Crash", producing.stop())
    flow.assert_nothing_lost()


def test_a_killed_container_and_a_deleted_pod_come_back_with_every_message(
        flow: Flow) -> None:
    """kill -9 of the follower's writer alone (the kubelet restarts that one container,
    which reconnects and catches up), then `kubectl delete pod` of the master (a clean
    shutdown; the StatefulSet makes a new pod on the same claim), with a producer running
    throughout: every acknowledged message is on both pods afterwards."""
    producing = flow.client.start_producing(f"{flow.service}:{WRITER}", "Restart",
                                            flow.directory / "restart.log")
    wait_for("acknowledgements before the kill", lambda: producing.acks_so_far() >= 20)
    killed = kill_containers(flow.node, flow.kube, flow.namespace, f"{NAME}-1", ["writer"])
    wait_restarted(flow.kube, flow.namespace, f"{NAME}-1", killed)
    master_uid = flow.pods()[f"{NAME}-0"]["metadata"]["uid"]
    flow.kube.kubectl("delete", "pod", f"{NAME}-0", "-n", flow.namespace, "--wait=false")
    wait_for("a new, ready master pod", lambda: (pod := flow.pods().get(f"{NAME}-0")) and (
        pod["metadata"]["uid"] != master_uid) and (condition(pod, "Ready") or {}).get(
        "status") == "True", timeout_s=300)
    flow.wait_listed("True", 2, 2)
    acked = producing.acks_so_far()
    wait_for("acknowledgements after the new master",
             lambda: producing.acks_so_far() >= acked + 20, timeout_s=ACKS_DURING_S)
    flow.record("Restart", producing.stop())
    flow.assert_nothing_lost()


def test_deleting_the_broker_removes_its_children_and_keeps_its_claims(flow: Flow) -> None:
    """`kubectl delete broker`: the garbage collector removes the StatefulSet, its pods, the
    ConfigMap, both Services and the PodDisruptionBudget; both claims and their volumes,
    with the data on them, stay (storage.deleteClaim is false)."""
    kube, namespace = flow.kube, flow.namespace
    kube.kubectl("delete", "broker", NAME, "-n", namespace, "--wait=true", "--timeout=120s")
    children = [("statefulset", NAME), ("configmap", f"{NAME}-config"), ("service", NAME),
                ("service", f"{NAME}-headless"), ("pdb", NAME)]
    wait_for("every child and pod to be collected", lambda: not flow.pods() and not any(
        kube.get(kind, name, namespace) for kind, name in children), timeout_s=180)
    for ordinal in (0, 1):
        claim = kube.must_get("pvc", f"data-{NAME}-{ordinal}", namespace)
        assert claim["status"]["phase"] == "Bound"
        volume = kube.must_get("pv", claim["spec"]["volumeName"])
        commit_log = Path(volume["spec"]["local"]["path"]) / "commitlog"
        assert sorted(p.name for p in commit_log.iterdir())[0] == "00000000000000000000"
