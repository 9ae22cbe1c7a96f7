"""External listeners (operator/external.py): the NodePort numbering, each group's config,
the Services, the containers' ports, the policies, and the spec's and CRD's bounds."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import yaml

from mqstore.operator import names
from mqstore.operator.config_map import build_config_map
from mqstore.operator.external import (
    build_entry_service,
    build_pod_external_services,
    entry_node_port,
    external_config,
    external_name_server,
    load_balancer_address,
    pod_node_port,
)
from mqstore.operator.groups import group_view
from mqstore.operator.name_server import build_namesrv_deployment
from mqstore.operator.network_policy import (
    build_broker_network_policy,
    build_namesrv_network_policy,
)
from mqstore.operator.spec import (
    GROUPS_MAX,
    NODE_PORT_BASE_MAX,
    NODE_PORT_MAX,
    NODE_PORT_MIN,
    REPLICAS_MAX,
    BrokerSpec,
    SpecError,
    parse_spec,
)
from mqstore.operator.statefulset import build_statefulset

from .broker_fixtures import broker, crd_schema

HOST = "203.0.113.7"
EXTERNAL = {"enabled": True, "host": HOST, "nodePortBase": 31000}
CLUSTER = {"storage": {"size": "10Gi"}, "replicas": 3, "groups": 2,
           "nameServer": {"replicas": 1}, "network": {"external": EXTERNAL}}


def parsed(spec: dict[str, Any]) -> tuple[dict[str, Any], BrokerSpec]:
    body = broker(spec=spec)
    return body, parse_spec(body["spec"])


def test_every_port_of_the_largest_cluster_is_distinct_and_in_the_nodeport_range() -> None:
    for base in (NODE_PORT_MIN, 30900, NODE_PORT_BASE_MAX):
        ports = [entry_node_port(base)] + [
            pod_node_port(base, group_index=group, pod_index=pod)
            for group, pod in itertools.product(range(GROUPS_MAX), range(REPLICAS_MAX))]
        assert len(ports) == len(set(ports)) == 1 + 16 * 16
        assert all(NODE_PORT_MIN <= port <= NODE_PORT_MAX for port in ports), base
        assert ports == list(range(base, base + 257)), "one contiguous range from the base"
    assert pod_node_port(NODE_PORT_BASE_MAX, group_index=15, pod_index=15) == NODE_PORT_MAX


def test_the_numbering_table() -> None:
    assert entry_node_port(30900) == 30900
    assert pod_node_port(30900, group_index=0, pod_index=0) == 30901
    assert pod_node_port(30900, group_index=0, pod_index=2) == 30903
    assert pod_node_port(30900, group_index=1, pod_index=0) == 30917
    assert pod_node_port(30900, group_index=2, pod_index=1) == 30934
    with pytest.raises(AssertionError):
        pod_node_port(30900, group_index=0, pod_index=REPLICAS_MAX)
    with pytest.raises(AssertionError):
        entry_node_port(NODE_PORT_BASE_MAX + 1)


def test_each_group_advertises_its_pod_0_port_plus_the_broker_id() -> None:
    _, spec = parsed(CLUSTER)
    assert external_config(spec, group_index=1) == {
        "external_enabled": True, "external_port": 9877,
        "external_advertised_address": f"{HOST}:31017",
        "external_advertised_port_plus_broker_id": True}
    body, spec = parsed(CLUSTER)
    for index, port in ((0, 31001), (1, 31017)):
        view = group_view(body, index, clustered=True)
        text = build_config_map(view, spec)["data"]["mqstore.yaml"]
        remoting = yaml.safe_load(text)["remoting"]
        assert remoting["external_advertised_address"] == f"{HOST}:{port}"
        assert remoting["external_advertised_port_plus_broker_id"] is True
        assert (remoting["external_enabled"], remoting["external_port"]) == (True, 9877)
    assert external_name_server(spec) == f"{HOST}:31000"


def test_one_nodeport_service_per_pod_selecting_that_pod() -> None:
    body, spec = parsed(CLUSTER)
    view = group_view(body, 1, clustered=True)
    services = build_pod_external_services(view, spec, replicas=3)
    assert [s["metadata"]["name"] for s in services] == [
        "demo-g1-0-external", "demo-g1-1-external", "demo-g1-2-external"]
    for pod_index, service in enumerate(services):
        assert service["spec"]["type"] == "NodePort"
        assert service["spec"]["externalTrafficPolicy"] == "Cluster"
        assert service["spec"]["selector"] == {
            **names.selector_labels("demo-g1"),
            "statefulset.kubernetes.io/pod-name": f"demo-g1-{pod_index}"}
        assert service["spec"]["ports"] == [{
            "name": "remoting-ext", "port": 9877, "targetPort": "remoting-ext",
            "nodePort": 31017 + pod_index, "protocol": "TCP"}]
        labels = service["metadata"]["labels"]
        assert (labels[names.EXTERNAL_LABEL], labels[names.BROKER_LABEL]) == ("demo", "demo")
        assert service["metadata"]["ownerReferences"][0]["name"] == "demo"


def test_the_entry_selects_the_name_servers_on_their_external_listener() -> None:
    body, spec = parsed(CLUSTER)
    entry = build_entry_service(body, spec)
    assert entry["metadata"]["name"] == "demo-external"
    assert entry["spec"]["selector"]["app.kubernetes.io/component"] == "namesrv"
    assert entry["spec"]["ports"][0]["nodePort"] == 31000
    assert entry["spec"]["ports"][0]["targetPort"] == "remoting-ext"
    assert entry["metadata"]["labels"][names.EXTERNAL_LABEL] == "demo"
    (namesrv,) = build_namesrv_deployment(body, spec, image="i")["spec"]["template"][
        "spec"]["containers"]
    assert namesrv["command"][-2:] == ["--external-port", "9877"]
    assert {"name": "remoting-ext", "containerPort": 9877, "protocol": "TCP"} in \
        namesrv["ports"]


def test_without_name_servers_the_entry_is_pod_0_which_answers_for_itself() -> None:
    body, spec = parsed({"storage": {"size": "10Gi"}, "replicas": 2,
                         "network": {"external": EXTERNAL}})
    entry = build_entry_service(body, spec)
    assert entry["spec"]["selector"] == {**names.selector_labels("demo"),
                                         "statefulset.kubernetes.io/pod-name": "demo-0"}
    assert entry["spec"]["ports"][0]["nodePort"] == 31000
    assert names.BROKER_LABEL not in entry["metadata"]["labels"]
    services = build_pod_external_services(body, spec, replicas=2)
    assert [(s["metadata"]["name"], s["spec"]["ports"][0]["nodePort"]) for s in services] \
        == [("demo-0-external", 31001), ("demo-1-external", 31002)]


def _notifier(spec: dict[str, Any]) -> dict[str, Any]:
    body, parsed_spec = parsed(spec)
    sts = build_statefulset(body, parsed_spec, image="i", replicas=1, config_hash="h")
    found: dict[str, Any] = next(c for c in sts["spec"]["template"]["spec"]["containers"]
                                 if c["name"] == "notifier")
    return found


def test_a_one_group_notifier_gets_the_port_and_its_broker_id_only_when_external() -> None:
    external = _notifier({"storage": {"size": "10Gi"}, "network": {"external": EXTERNAL}})
    assert {"name": "remoting-ext", "containerPort": 9877, "protocol": "TCP"} in \
        external["ports"]
    assert "MQSTORE_REMOTING__BROKER_ID" in {e["name"] for e in external["env"]}
    plain = _notifier({"storage": {"size": "10Gi"}})
    assert [p["name"] for p in plain["ports"]] == ["notifier", "remoting"]
    assert "MQSTORE_REMOTING__BROKER_ID" not in {e["name"] for e in plain["env"]}


def _external_rules(policy: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for rule in policy["spec"]["ingress"]
            if any(port["port"] == 9877 for port in rule["ports"])]


def test_the_policies_admit_9877_from_anywhere_only_when_external() -> None:
    body, spec = parsed(CLUSTER)
    for policy in (build_broker_network_policy(body, spec, operator_namespace=None),
                   build_namesrv_network_policy(body, spec)):
        assert _external_rules(policy) == [{"ports": [{"protocol": "TCP", "port": 9877}]}]
    body, spec = parsed({**CLUSTER, "network": {}})
    for policy in (build_broker_network_policy(body, spec, operator_namespace=None),
                   build_namesrv_network_policy(body, spec)):
        assert _external_rules(policy) == []
        assert all(rule.get("from") for rule in policy["spec"]["ingress"])


def test_the_spec_refuses_what_the_crd_refuses() -> None:
    storage = {"size": "1Gi"}
    with pytest.raises(SpecError, match=r"external\.host is required"):
        parse_spec({"storage": storage, "network": {"external": {"enabled": True}}})
    for base in (NODE_PORT_MIN - 1, NODE_PORT_BASE_MAX + 1):
        with pytest.raises(SpecError, match="nodePortBase must be 30000 to 32511"):
            parse_spec({"storage": storage, "network": {"external": {"nodePortBase": base}}})
    with pytest.raises(SpecError, match="replicas must be at most 16"):
        parse_spec({"storage": storage, "replicas": 17,
                    "network": {"external": EXTERNAL}})
    off = parse_spec({"storage": storage})
    assert (off.network.external.enabled, off.network.external.node_port_base) == (False, 30900)
    assert external_name_server(off) == ""
    with pytest.raises(SpecError, match="type must be one of NodePort, LoadBalancer"):
        parse_spec({"storage": storage, "network": {"external": {"type": "Ingress"}}})
    balanced = parse_spec({"storage": storage, "network": {"external": {
        "enabled": True, "type": "LoadBalancer"}}})
    assert external_name_server(balanced) == "", "no host needed, no address yet"


def test_a_load_balancers_address_is_its_first_ingress_on_9877() -> None:
    def service(*ingress: dict[str, str]) -> dict[str, Any]:
        return {"status": {"loadBalancer": {"ingress": list(ingress)}}}

    assert load_balancer_address(service({"ip": "10.7.0.2"}, {"ip": "10.7.0.9"})) == \
        "10.7.0.2:9877"
    assert load_balancer_address(service({"hostname": "lb.example"})) == "lb.example:9877"
    assert load_balancer_address(service({"ip": "fd00::7"})) == "[fd00::7]:9877"
    assert load_balancer_address(service()) is None
    assert load_balancer_address({"status": {}}) is None
    assert load_balancer_address(None) is None


def test_the_crd_bounds_are_the_numberings() -> None:
    spec = crd_schema()["properties"]["spec"]
    replicas = spec["properties"]["replicas"]
    assert replicas["maximum"] == REPLICAS_MAX
    assert spec["properties"]["groups"]["maximum"] == GROUPS_MAX
    external = spec["properties"]["network"]["properties"]["external"]
    base = external["properties"]["nodePortBase"]
    assert (base["minimum"], base["maximum"], base["default"]) == (
        NODE_PORT_MIN, NODE_PORT_BASE_MAX, 30900)
    assert external["properties"]["type"]["enum"] == ["NodePort", "LoadBalancer"]
    (rule,) = external["x-kubernetes-validations"]
    assert "size(self.host) > 0" in rule["rule"] and "'LoadBalancer'" in rule["rule"]
    assert "network.external.host is required" in rule["message"]
    status = crd_schema()["properties"]["status"]["properties"]
    assert status["external"]["properties"]["nameServer"]["type"] == "string"
