"""A Broker as a RocketMQ cluster: name servers and broker groups, built, applied, refused
and reported."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml

from mqstore.operator import names
from mqstore.operator.groups import cluster_spec, decide_groups, group_view
from mqstore.operator.kube import object_path
from mqstore.operator.name_server import build_namesrv_deployment
from mqstore.operator.reconcile import Outcome, children, reconcile
from mqstore.operator.settings import OperatorSettings
from mqstore.operator.spec import SpecError, parse_spec
from mqstore.operator.status import GroupObservation, Observation, build_status

from .broker_fixtures import CRD_PATH, broker, crd
from .fake_api import FakeApi

SETTINGS = OperatorSettings(broker_image="registry.example/mqstore:1")
IMAGE = "registry.example/mqstore:1"
CLUSTER = {"storage": {"size": "10Gi"}, "replicas": 2, "groups": 2,
           "nameServer": {"replicas": 1, "resources": {"limits": {"memory": "256Mi"}}}}


def run(api: FakeApi, body: dict[str, Any]) -> Outcome:
    return asyncio.run(reconcile(api, body, settings=SETTINGS,  # type: ignore[arg-type]
                                 now="2030-01-01T00:00:00Z"))


def path(kind: str, name: str) -> str:
    api_version = {"StatefulSet": "apps/v1", "Deployment": "apps/v1"}.get(kind, "v1")
    return object_path(api_version, kind, "ns1", name)


def config_of(api: FakeApi, config_map: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(
        api.objects[path("ConfigMap", config_map)]["data"]["mqstore.yaml"])
    return document


def container(sts: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in sts["spec"]["template"]["spec"]["containers"]
                                 if c["name"] == name)
    return found


def conditions(outcome: Outcome) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in outcome.status["conditions"]}


def test_a_one_group_broker_is_its_own_group_0_without_cluster_marks() -> None:
    body = broker()
    spec = parse_spec(body["spec"])
    assert group_view(body, 0, clustered=False) is body
    manifests, _ = children(body, spec, None, image=IMAGE, replicas=1)
    for manifest in manifests:
        assert names.BROKER_LABEL not in manifest["metadata"]["labels"]
    sts = next(m for m in manifests if m["kind"] == "StatefulSet")
    env = {e["name"] for e in container(sts, "notifier")["env"]}
    assert "MQSTORE_REMOTING__BROKER_ID" not in env
    text = next(m for m in manifests if m["kind"] == "ConfigMap")["data"]["mqstore.yaml"]
    assert "namesrv_addresses" not in text and "cluster_name" not in text


def test_two_groups_share_the_cluster_and_register_with_the_name_servers() -> None:
    api = FakeApi()
    outcome = run(api, broker(spec=CLUSTER))
    for group in ("demo", "demo-g1"):
        sts = api.objects[path("StatefulSet", group)]
        assert sts["spec"]["replicas"] == 2
        assert sts["spec"]["serviceName"] == f"{group}-headless"
        assert sts["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == group
        assert sts["spec"]["template"]["metadata"]["labels"][names.BROKER_LABEL] == "demo"
        assert {"fieldRef": {"apiVersion": "v1", "fieldPath":
                             "metadata.labels['apps.kubernetes.io/pod-index']"}} in [
            e.get("valueFrom") for e in container(sts, "notifier")["env"]
            if e["name"] == "MQSTORE_REMOTING__BROKER_ID"]
        assert "MQSTORE_REMOTING__BROKER_ID" not in {
            e["name"] for e in container(sts, "writer")["env"]}
        secrets = [source["secret"]["name"] for volume in sts["spec"]["template"]["spec"][
            "volumes"] if "projected" in volume for source in volume["projected"]["sources"]
            if "secret" in source]
        assert secrets == ["demo-users", "demo-replication"], "one set of credentials"
        remoting = config_of(api, f"{group}-config")["remoting"]
        assert remoting["cluster_name"] == "demo"
        assert remoting["broker_name"] == group
        assert remoting["namesrv_addresses"] == "demo-namesrv-headless.ns1.svc:9876"
        assert config_of(api, f"{group}-config")["replication"]["master"] == \
            f"{group}-0.{group}-headless.ns1.svc:8084"
    for service in ("demo-g1", "demo-g1-headless", "demo-namesrv", "demo-namesrv-headless"):
        assert path("Service", service) in api.objects
    assert outcome.status["groups"][1] == {"name": "demo-g1", "replicas": 0,
                                           "readyReplicas": 0, "master": "demo-g1-0"}
    assert outcome.status["labelSelector"] == (
        "app.kubernetes.io/component=broker,app.kubernetes.io/name=mqstore,"
        "mqstore.io/broker=demo")


def test_every_object_is_owned_by_the_real_broker() -> None:
    api = FakeApi()
    run(api, broker(spec=CLUSTER))
    assert len(api.objects) >= 17
    for obj in api.objects.values():
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Broker", "demo", "uid-1")


def test_name_servers_come_and_go_with_their_replicas() -> None:
    api = FakeApi()
    spec: dict[str, Any] = {"storage": {"size": "10Gi"}, "nameServer": {"replicas": 2}}
    run(api, broker(spec=spec))
    namesrv = [path("Deployment", "demo-namesrv"), path("Service", "demo-namesrv"),
               path("Service", "demo-namesrv-headless")]
    assert all(p in api.objects for p in namesrv)
    assert api.objects[namesrv[0]]["spec"]["replicas"] == 2
    headless = api.objects[namesrv[2]]["spec"]
    assert (headless["clusterIP"], headless["publishNotReadyAddresses"]) == ("None", False)
    assert headless["ports"][0]["port"] == 9876
    spec["nameServer"] = {"replicas": 0}
    run(api, broker(spec=spec))
    assert not [p for p in namesrv if p in api.objects]
    assert "namesrv_addresses" not in config_of(api, "demo-config")["remoting"]


def test_the_name_server_pod_is_locked_down_like_the_others() -> None:
    body = broker(spec=CLUSTER)
    deployment = build_namesrv_deployment(body, parse_spec(body["spec"]), image=IMAGE)
    pod = deployment["spec"]["template"]["spec"]
    (namesrv,) = pod["containers"]
    assert namesrv["command"] == ["mqstore", "namesrv", "--host", "0.0.0.0", "--port", "9876"]
    assert namesrv["readinessProbe"]["tcpSocket"] == {"port": "remoting"}
    assert namesrv["livenessProbe"]["tcpSocket"] == {"port": "remoting"}
    assert namesrv["resources"] == {"limits": {"memory": "256Mi"}}
    assert namesrv["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert deployment["spec"]["selector"]["matchLabels"].items() <= \
        deployment["spec"]["template"]["metadata"]["labels"].items()
    assert deployment["metadata"]["labels"][names.BROKER_LABEL] == "demo"


def test_groups_decisions() -> None:
    assert decide_groups(wanted=3, live=1) == 3
    assert decide_groups(wanted=1, live=3) == 3
    spec = parse_spec(broker(spec={**CLUSTER, "groups": 1, "nameServer": {}})["spec"])
    kept = cluster_spec(spec, live_groups=2)
    assert (kept.groups, kept.name_server.replicas) == (2, 1), "a draining group is kept"
    assert cluster_spec(spec, live_groups=1) == spec


def test_more_than_one_group_needs_name_servers() -> None:
    with pytest.raises(SpecError, match=r"nameServer\.replicas >= 1"):
        parse_spec({"storage": {"size": "1Gi"}, "groups": 2})
    outcome = run(FakeApi(), broker(spec={"storage": {"size": "10Gi"}, "groups": 2}))
    assert conditions(outcome)["Degraded"] == ("True", "InvalidSpec")


def _sts(ready: int, wanted: int = 2) -> dict[str, Any]:
    return {"metadata": {"generation": 1}, "spec": {"replicas": wanted},
            "status": {"replicas": wanted, "readyReplicas": ready, "updatedReplicas": wanted,
                       "currentRevision": "r", "updateRevision": "r",
                       "observedGeneration": 1}}


def test_ready_only_when_every_group_and_the_name_servers_are() -> None:
    def status(g1_ready: int, namesrv_ready: int) -> dict[str, Any]:
        groups = [GroupObservation(name="demo", statefulset=_sts(2)),
                  GroupObservation(name="demo-g1", statefulset=_sts(g1_ready))]
        observation = Observation(generation=1, paused=False, statefulset=_sts(2),
                                  groups=groups, name_servers_wanted=1,
                                  name_servers={"status": {"replicas": 1,
                                                           "readyReplicas": namesrv_ready}})
        return build_status(observation, old_status={}, now="t")

    def ready(status: dict[str, Any]) -> tuple[str, str]:
        return next((c["status"], c["reason"]) for c in status["conditions"]
                    if c["type"] == "Ready")

    partial = status(1, 1)
    assert ready(partial) == ("False", "ReplicasNotReady")
    assert (partial["readyGroups"], partial["readyReplicas"], partial["replicas"]) == (1, 1, 2)
    assert "group demo-g1" in partial["conditions"][0]["message"]
    assert ready(status(2, 0)) == ("False", "NameServersNotReady")
    full = status(2, 1)
    assert ready(full) == ("True", "AllReplicasReady")
    assert full["readyGroups"] == 2
    assert full["nameServers"] == {"replicas": 1, "readyReplicas": 1}
    assert full["groups"][0] == {"name": "demo", "replicas": 2, "readyReplicas": 2,
                                 "master": "demo-0"}


def test_the_crd_refuses_groups_without_name_servers_and_shows_groups() -> None:
    version = crd()["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = {rule["rule"]: rule["message"] for rule in spec["x-kubernetes-validations"]}
    (rule,) = [text for text in rules if "self.groups" in text]
    assert "self.nameServer.replicas >= 1" in rule
    assert "groups > 1 needs nameServer.replicas >= 1" in rules[rule]
    assert (spec["properties"]["groups"]["minimum"], spec["properties"]["groups"]["maximum"]) \
        == (1, 16)
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Groups"] == ".spec.groups"
    assert columns["Ready-Groups"] == ".status.readyGroups"
    assert columns["Ready-Replicas"] == ".status.readyReplicas"
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert {"groups", "readyGroups", "nameServers"} <= set(status)


def test_the_name_servers_admit_the_groups_and_the_clients() -> None:
    api = FakeApi()
    run(api, broker(spec=CLUSTER))
    policy_path = object_path("networking.k8s.io/v1", "NetworkPolicy", "ns1", "demo-namesrv")
    policy = api.objects[policy_path]
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == \
        "namesrv"
    (brokers, clients) = policy["spec"]["ingress"]
    assert brokers["from"] == [{"podSelector": {"matchLabels": {
        names.BROKER_LABEL: "demo", "app.kubernetes.io/component": "broker"}}}]
    assert [p["port"] for p in brokers["ports"] + clients["ports"]] == [9876, 9876]
    run(api, broker(spec={**CLUSTER, "network": {"policies": False}}))
    assert policy_path not in api.objects
    assert path("Deployment", "demo-namesrv") in api.objects


def test_a_group_named_like_another_brokers_statefulset_is_not_taken_over() -> None:
    api = FakeApi()
    other = {"apiVersion": "apps/v1", "kind": "StatefulSet",
             "metadata": {"name": "demo-g1", "namespace": "ns1", "ownerReferences": [
                 {"kind": "Broker", "name": "demo-g1", "uid": "uid-2"}]},
             "spec": {"replicas": 1}}
    api.put(other)
    outcome = run(api, broker(spec=CLUSTER))
    assert conditions(outcome)["Degraded"] == ("True", "InvalidSpec")
    assert "demo-g1" in outcome.status["conditions"][2]["message"]
    assert api.objects[path("StatefulSet", "demo-g1")] == other
    assert not [call for call in api.calls if call[0] == "APPLY"]
    alone = run(api, broker(spec={"storage": {"size": "10Gi"}}))
    assert conditions(alone)["Degraded"] == ("False", "AsExpected"), \
        "another Broker's StatefulSet past spec.groups is not a live group"
    assert [g["name"] for g in alone.status["groups"]] == ["demo"]


def test_the_example_broker_shows_the_cluster_fields_at_their_defaults() -> None:
    example = yaml.safe_load((CRD_PATH.parents[1] / "examples" / "broker.yaml").read_text())
    spec = parse_spec(example["spec"])
    assert (spec.groups, spec.name_server.replicas) == (1, 0)
    assert "groups" in example["spec"] and "replicas" in example["spec"]["nameServer"]


def test_a_group_count_out_of_range_is_an_invalid_spec() -> None:
    for groups in (0, 17):
        with pytest.raises(SpecError, match=r"spec\.groups must be 1 to 16"):
            parse_spec({"storage": {"size": "1Gi"}, "groups": groups,
                        "nameServer": {"replicas": 1}})


def test_scaling_the_name_servers_rolls_no_broker_pod() -> None:
    api = FakeApi()
    run(api, broker(spec=CLUSTER))
    before = {group: api.objects[path("StatefulSet", group)] for group in ("demo", "demo-g1")}
    run(api, broker(spec={**CLUSTER, "nameServer": {"replicas": 3}}))
    assert api.objects[path("Deployment", "demo-namesrv")]["spec"]["replicas"] == 3
    for group, sts in before.items():
        assert api.objects[path("StatefulSet", group)] == sts
