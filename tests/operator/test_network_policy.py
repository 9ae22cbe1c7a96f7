"""The NetworkPolicies' rules: replication only between the Broker's pods, client and
metrics ports only from the peers the spec names, and never a rule that admits everyone."""

from __future__ import annotations

from typing import Any

from mqstore.operator.network_policy import (
    build_broker_network_policy,
    build_notifier_network_policy,
)
from mqstore.operator.spec import parse_spec

from .broker_fixtures import broker

OWN_PODS = {"podSelector": {"matchLabels": {
    "app.kubernetes.io/name": "mqstore", "app.kubernetes.io/instance": "demo",
    "app.kubernetes.io/component": "broker"}}}
PROMETHEUS = {"namespaceSelector": {}, "podSelector": {"matchLabels": {
    "app.kubernetes.io/name": "prometheus"}}}
OPERATOR = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name":
                                                  "mqstore-system"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "mqstore-operator"}}}


def _policy(network: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"storage": {"size": "10Gi"}}
    if network is not None:
        spec["network"] = network
    body = broker(spec=spec)
    return build_broker_network_policy(body, parse_spec(body["spec"]),
                                       operator_namespace="mqstore-system")


def _rules(policy: dict[str, Any]) -> dict[tuple[int, ...], list[dict[str, Any]]]:
    """ports -> peers, one entry per rule."""
    rules = {}
    for rule in policy["spec"]["ingress"]:
        assert rule.get("from"), "a rule without peers would admit everyone"
        rules[tuple(port["port"] for port in rule["ports"])] = rule["from"]
    return rules


def test_by_default_clients_are_the_namespaces_pods_and_replication_the_brokers() -> None:
    policy = _policy()
    assert policy["kind"] == "NetworkPolicy"
    assert policy["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert policy["spec"]["podSelector"] == OWN_PODS["podSelector"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    extra_notifiers = {"podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "mqstore", "app.kubernetes.io/instance": "demo",
        "app.kubernetes.io/component": "notifier"}}}
    assert _rules(policy) == {(8084,): [OWN_PODS],
                              (8081, 8083, 9876): [{"podSelector": {}}],
                              (8082,): [extra_notifiers],
                              (8081, 8082, 8083): [PROMETHEUS],
                              (8081, 8083): [OPERATOR]}


def test_selected_namespaces_and_pods_become_the_client_peers() -> None:
    clients = [{"namespaceSelector": {"matchLabels": {"team": "orders"}},
                "podSelector": {"matchLabels": {"role": "producer"}}},
               {"ipBlock": {"cidr": "10.9.0.0/16", "except": ["10.9.1.0/24"]}}]
    rules = _rules(_policy({"clients": clients, "metrics": []}))
    assert rules[8081, 8083, 9876] == clients
    assert (8081, 8082, 8083) not in rules, "metrics: [] opens nothing for scraping"


def test_no_clients_means_no_client_rule_not_an_open_one() -> None:
    rules = _rules(_policy({"clients": [], "metrics": []}))
    assert set(rules) == {(8084,), (8082,), (8081, 8083)}
    assert rules[8081, 8083] == [OPERATOR], "only the operator, for a roll's check and a drain"


def test_the_extra_notifiers_take_clients_and_metrics_only() -> None:
    body = broker(spec={"storage": {"size": "10Gi", "accessModes": ["ReadWriteMany"]},
                        "notifier": {"replicas": 2}})
    policy = build_notifier_network_policy(body, parse_spec(body["spec"]))
    assert policy["metadata"]["name"] == "demo-notifier"
    assert policy["spec"]["podSelector"]["matchLabels"][
        "app.kubernetes.io/component"] == "notifier"
    assert _rules(policy) == {(8083, 9876): [{"podSelector": {}}], (8083,): [PROMETHEUS]}


def test_the_operator_reaches_the_writer_and_notifier_ports_for_rolls_and_drains() -> None:
    """Its namespace when it knows it; else any namespace, its own pod labels only."""
    assert _rules(_policy())[8081, 8083] == [OPERATOR]
    body = broker(spec={"storage": {"size": "10Gi"}, "network": {"clients": []}})
    anywhere = build_broker_network_policy(body, parse_spec(body["spec"]),
                                           operator_namespace=None)
    assert _rules(anywhere)[8081, 8083] == [{**OPERATOR, "namespaceSelector": {}}]
