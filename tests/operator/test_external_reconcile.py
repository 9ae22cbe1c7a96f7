"""External listeners through whole reconcile passes: the Services applied, pruned when no
longer wanted, the status, and a Broker without them exactly as before."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import yaml

from mqstore.operator import names
from mqstore.operator.kube import object_path
from mqstore.operator.reconcile import Outcome, reconcile
from mqstore.operator.settings import OperatorSettings

from .broker_fixtures import broker
from .fake_api import FakeApi

SETTINGS = OperatorSettings(broker_image="registry.example/mqstore:1")
EXTERNAL = {"enabled": True, "host": "node.example", "nodePortBase": 30900}
CLUSTER = {"storage": {"size": "10Gi"}, "replicas": 2, "groups": 2,
           "nameServer": {"replicas": 1}, "network": {"external": EXTERNAL}}


def run(api: FakeApi, spec: dict[str, Any], *,
        annotations: dict[str, str] | None = None,
        status: dict[str, Any] | None = None) -> Outcome:
    body = broker(spec=spec, annotations=annotations, status=status)
    return asyncio.run(reconcile(api, body, settings=SETTINGS,  # type: ignore[arg-type]
                                 now="2030-01-01T00:00:00Z"))


def external_services(api: FakeApi) -> dict[str, tuple[int, dict[str, str]]]:
    """name -> (nodePort, selector) of every Service labelled as external."""
    prefix = object_path("v1", "Service", "ns1") + "/"
    return {obj["metadata"]["name"]: (obj["spec"]["ports"][0]["nodePort"],
                                      obj["spec"]["selector"])
            for path, obj in api.objects.items() if path.startswith(prefix)
            and names.EXTERNAL_LABEL in obj["metadata"]["labels"]}


def test_a_cluster_gets_an_entry_and_a_service_per_pod() -> None:
    api = FakeApi()
    outcome = run(api, CLUSTER)
    services = external_services(api)
    assert {name: port for name, (port, _) in services.items()} == {
        "demo-external": 30900, "demo-0-external": 30901, "demo-1-external": 30902,
        "demo-g1-0-external": 30917, "demo-g1-1-external": 30918}
    assert services["demo-external"][1]["app.kubernetes.io/component"] == "namesrv"
    assert services["demo-g1-1-external"][1][
        "statefulset.kubernetes.io/pod-name"] == "demo-g1-1"
    assert outcome.status["external"] == {"nameServer": "node.example:30900"}
    assert outcome.result == "ok"


def test_switching_external_off_deletes_every_external_service() -> None:
    api = FakeApi()
    first = run(api, CLUSTER)
    off = {**CLUSTER, "network": {"external": {**EXTERNAL, "enabled": False}}}
    outcome = run(api, off, status=first.status)
    assert external_services(api) == {}
    assert outcome.status["external"] is None, "the merge patch removes it"
    for group in ("demo", "demo-g1"):
        config = api.objects[object_path("v1", "ConfigMap", "ns1", f"{group}-config")]
        assert "external" not in config["data"]["mqstore.yaml"]


def test_lowering_replicas_deletes_the_removed_pods_services_once_allowed() -> None:
    api = FakeApi()
    run(api, {**CLUSTER, "replicas": 3})
    lowered = {**CLUSTER, "replicas": 1}
    run(api, lowered)
    assert "demo-2-external" in external_services(api), "refused: the pods still run"
    run(api, lowered, annotations={names.ALLOW_SCALE_DOWN_ANNOTATION: "true"})
    assert sorted(external_services(api)) == ["demo-0-external", "demo-external",
                                              "demo-g1-0-external"]


def test_pruning_leaves_other_brokers_and_unlabelled_services_alone() -> None:
    api = FakeApi()
    other = {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": "other-0-external", "namespace": "ns1",
                          "labels": {names.EXTERNAL_LABEL: "other"}},
             "spec": {"ports": [{"nodePort": 31500}], "selector": {}}}
    api.put(other)
    run(api, {**CLUSTER, "network": {}})
    assert "other-0-external" in external_services(api)
    assert object_path("v1", "Service", "ns1", "demo") in api.objects


def test_a_one_group_broker_without_name_servers_enters_through_pod_0() -> None:
    api = FakeApi()
    outcome = run(api, {"storage": {"size": "10Gi"}, "network": {"external": EXTERNAL}})
    services = external_services(api)
    assert sorted(services) == ["demo-0-external", "demo-external"]
    assert services["demo-external"] == (30900, {
        **names.selector_labels("demo"), "statefulset.kubernetes.io/pod-name": "demo-0"})
    assert services["demo-0-external"][0] == 30901
    assert object_path("apps/v1", "Deployment", "ns1", "demo-namesrv") not in api.objects
    assert outcome.status["external"] == {"nameServer": "node.example:30900"}


def test_adding_name_servers_moves_the_entry_to_them() -> None:
    api = FakeApi()
    alone = {"storage": {"size": "10Gi"}, "network": {"external": EXTERNAL}}
    run(api, alone)
    run(api, {**alone, "nameServer": {"replicas": 1}})
    port, selector = external_services(api)["demo-external"]
    assert (port, selector["app.kubernetes.io/component"]) == (30900, "namesrv")


def test_without_network_external_nothing_mentions_it() -> None:
    """Every object and the status of a Broker without `network.external` (or with it off)
    carry neither the port nor the word: such a Broker renders as before it existed."""
    for spec in ({"storage": {"size": "10Gi"}, "replicas": 3},
                 {**CLUSTER, "network": {}},
                 {**CLUSTER, "network": {"external": {**EXTERNAL, "enabled": False}}}):
        api = FakeApi()
        outcome = run(api, spec)
        text = json.dumps([api.objects, outcome.status])
        assert "9877" not in text and "external" not in text.lower(), spec
        sts = api.objects[object_path("apps/v1", "StatefulSet", "ns1", "demo")]
        notifier = next(c for c in sts["spec"]["template"]["spec"]["containers"]
                        if c["name"] == "notifier")
        broker_id = "MQSTORE_REMOTING__BROKER_ID" in {e["name"] for e in notifier["env"]}
        assert broker_id == (spec.get("groups") == 2), "only a cluster's pods register"


def test_a_second_pass_changes_nothing() -> None:
    api = FakeApi()
    run(api, CLUSTER)
    before = json.dumps(api.objects, sort_keys=True)
    run(api, CLUSTER)
    assert json.dumps(api.objects, sort_keys=True) == before


def test_paused_keeps_the_reported_entry() -> None:
    api = FakeApi()
    first = run(api, CLUSTER)
    paused = run(api, {**CLUSTER, "paused": True, "network": {}}, status=first.status)
    assert paused.status["external"] == {"nameServer": "node.example:30900"}
    assert len(external_services(api)) == 5, "paused: nothing is pruned"


LOAD_BALANCED = {**CLUSTER, "network": {"external": {"enabled": True,
                                                     "type": "LoadBalancer"}}}


def _give_addresses(api: FakeApi, addresses: dict[str, str]) -> None:
    """What a load balancer controller does: each Service's status.loadBalancer.ingress."""
    for name, address in addresses.items():
        path = object_path("v1", "Service", "ns1", name)
        api.objects[path] = {**api.objects[path],
                             "status": {"loadBalancer": {"ingress": [{"ip": address}]}}}


def _progressing(outcome: Outcome) -> dict[str, Any]:
    return next(c for c in outcome.status["conditions"] if c["type"] == "Progressing")


def test_load_balancers_come_first_and_the_groups_start_once_each_has_an_address() -> None:
    api = FakeApi()
    first = run(api, LOAD_BALANCED)
    prefix = object_path("v1", "Service", "ns1") + "/"
    services = {obj["metadata"]["name"]: obj["spec"] for path, obj in api.objects.items()
                if path.startswith(prefix) and names.EXTERNAL_LABEL in obj["metadata"]["labels"]}
    assert set(services) == {"demo-external", "demo-0-external", "demo-1-external",
                             "demo-g1-0-external", "demo-g1-1-external"}
    for spec in services.values():
        assert (spec["type"], spec["allocateLoadBalancerNodePorts"]) == ("LoadBalancer", False)
        assert "nodePort" not in spec["ports"][0] and spec["ports"][0]["port"] == 9877
    assert object_path("apps/v1", "StatefulSet", "ns1", "demo") not in api.objects
    assert object_path("v1", "ConfigMap", "ns1", "demo-config") not in api.objects
    assert _progressing(first)["reason"] == "WaitingForLoadBalancers"
    assert "external" not in first.status, "no address to give clients yet"
    _give_addresses(api, {"demo-external": "10.7.0.1", "demo-0-external": "10.7.0.2",
                          "demo-1-external": "10.7.0.3"})
    second = run(api, LOAD_BALANCED, status=first.status)
    assert object_path("apps/v1", "StatefulSet", "ns1", "demo") in api.objects
    assert object_path("apps/v1", "StatefulSet", "ns1", "demo-g1") not in api.objects
    assert "demo-g1-0-external" in _progressing(second)["message"]
    assert second.status["external"] == {"nameServer": "10.7.0.1:9877"}
    config = api.objects[object_path("v1", "ConfigMap", "ns1", "demo-config")]
    remoting = yaml.safe_load(config["data"]["mqstore.yaml"])["remoting"]
    assert remoting["external_advertised_addresses"] == "10.7.0.2:9877;10.7.0.3:9877"
    assert remoting["external_advertised_address"] == "10.7.0.2:9877"
    _give_addresses(api, {"demo-g1-0-external": "10.7.0.4", "demo-g1-1-external": "10.7.0.5"})
    third = run(api, LOAD_BALANCED, status=second.status)
    assert object_path("apps/v1", "StatefulSet", "ns1", "demo-g1") in api.objects
    assert _progressing(third)["reason"] != "WaitingForLoadBalancers"
