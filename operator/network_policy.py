"""The Broker's NetworkPolicies: who may open which port of its pods.

| port | service | allowed from |
|---|---|---|
| 8084 | replication (writer) | the Broker's own pods only |
| 8081, 8083, 9876 | produce (writer), consume (notifier HTTP, remoting) | `network.clients` |
| 8082 | the indexer's notice stream | the Broker's extra notifiers only |
| 8081, 8082, 8083 | /metrics, on the HTTP ports | `network.metrics` |
| 8081, 8083 on broker pods | a roll's check, a drain (operator/group_client.py) | the operator |
| 9876 on a name server | registration, routes | every group's broker pods, `network.clients` |
| 9877 | external listeners (broker pods, name servers; `network.external`) | anywhere |

Everything else into the pods is refused once a policy selects them (the writer's forward
listener and the notifier's link to the indexer stay on the pod's loopback, which no policy
covers).  The kubelet's probes come from the node itself, which most network plugins let
through whatever the policies say (docs/kubernetes.md).  Only ingress is restricted.

A rule with no `from` would admit everybody, so an empty peer list renders no rule at all:
`clients: []` shuts the client ports.  The one rule without `from` is deliberate: with
`network.external` the external listener (9877, operator/external.py) is reached through
NodePorts, so its connections arrive from a node's address (kube-proxy masquerades them,
externalTrafficPolicy Cluster) or, with a network plugin that keeps the source, from the
clients' own addresses anywhere: no peer list names either reliably.  The users file and
TLS, which that listener applies as 9876 does, are what protect it, as they protect a
Kafka listener Strimzi exposes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import names
from .name_server import namesrv_labels
from .network import notifier_labels
from .spec import BrokerSpec, PeerSpec

CLIENT_PORTS = (names.WRITER_PORT, names.NOTIFIER_PORT, names.REMOTING_PORT)
METRICS_PORTS = (names.WRITER_PORT, names.INDEXER_PORT, names.NOTIFIER_PORT)
NOTIFIER_CLIENT_PORTS = (names.NOTIFIER_PORT, names.REMOTING_PORT)
OPERATOR_PORTS = (names.WRITER_PORT, names.NOTIFIER_PORT)
"""What the operator asks of a group's master (operator/group_client.py): the roll its
writer, the drain its notifier."""

OPERATOR_POD_LABELS = {"app.kubernetes.io/name": "mqstore-operator"}
"""The operator pods' selector labels (charts/mqstore/templates/_helpers.tpl,
`mqstore.selectorLabels`: `<chart name>-operator`)."""


def operator_peer(namespace: str | None) -> dict[str, Any]:
    """The operator's pods in its namespace (`kubernetes.io/metadata.name`, which the API
    server sets on every namespace); in any namespace when it is not known."""
    namespaces = ({"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                  if namespace else {})
    return {"namespaceSelector": namespaces,
            "podSelector": {"matchLabels": dict(OPERATOR_POD_LABELS)}}


def render_peer(peer: PeerSpec) -> dict[str, Any]:
    rendered: dict[str, Any] = {}
    if peer.namespace_selector is not None:
        rendered["namespaceSelector"] = dict(peer.namespace_selector)
    if peer.pod_selector is not None:
        rendered["podSelector"] = dict(peer.pod_selector)
    if peer.ip_block is not None:
        rendered["ipBlock"] = dict(peer.ip_block)
    assert rendered, "the CRD requires one of namespaceSelector, podSelector, ipBlock"
    return rendered


def _rule(ports: Sequence[int], peers: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One ingress rule, or none for no peers (an empty `from` would mean everyone)."""
    if not peers:
        return []
    return [{"ports": [{"protocol": "TCP", "port": port} for port in ports],
             "from": [dict(peer) for peer in peers]}]


def _external_rule(spec: BrokerSpec) -> list[dict[str, Any]]:
    """9877 from any source with `network.external` (see above), else nothing."""
    if not spec.network.external.enabled:
        return []
    return [{"ports": [{"protocol": "TCP", "port": names.REMOTING_EXTERNAL_PORT}]}]


def _policy(broker: Mapping[str, Any], name: str, *, component: str,
            pod_labels: Mapping[str, str], rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": names.child_metadata(broker, name, component=component),
            "spec": {"podSelector": {"matchLabels": dict(pod_labels)},
                     "policyTypes": ["Ingress"], "ingress": rules}}


def build_broker_network_policy(broker: Mapping[str, Any], spec: BrokerSpec, *,
                                operator_namespace: str | None) -> dict[str, Any]:
    """`operator_namespace`: where the operator runs (OperatorSettings.namespace)."""
    name = broker["metadata"]["name"]
    own_pods = {"podSelector": {"matchLabels": names.selector_labels(name)}}
    extra_notifiers = {"podSelector": {"matchLabels": notifier_labels(name)}}
    clients = [render_peer(peer) for peer in spec.network.clients]
    metrics = [render_peer(peer) for peer in spec.network.metrics]
    rules = [*_rule([names.REPLICATION_PORT], [own_pods]),
             *_rule(CLIENT_PORTS, clients),
             *_rule([names.INDEXER_PORT], [extra_notifiers]),
             *_rule(METRICS_PORTS, metrics), *_external_rule(spec),
             *_rule(OPERATOR_PORTS, [operator_peer(operator_namespace)])]
    return _policy(broker, name, component="broker", pod_labels=names.selector_labels(name),
                   rules=rules)


def build_notifier_network_policy(broker: Mapping[str, Any],
                                  spec: BrokerSpec) -> dict[str, Any]:
    """The extra notifiers (notifier.replicas > 0): clients and metrics, nothing else."""
    name = broker["metadata"]["name"]
    clients = [render_peer(peer) for peer in spec.network.clients]
    metrics = [render_peer(peer) for peer in spec.network.metrics]
    rules = [*_rule(NOTIFIER_CLIENT_PORTS, clients), *_rule([names.NOTIFIER_PORT], metrics)]
    return _policy(broker, names.notifier_name(name), component="notifier",
                   pod_labels=notifier_labels(name), rules=rules)


def build_namesrv_network_policy(broker: Mapping[str, Any],
                                 spec: BrokerSpec) -> dict[str, Any]:
    """The name servers (nameServer.replicas > 0): every group's broker pods register,
    clients ask for routes; both on the remoting port, and clients outside on 9877 with
    `network.external`; nothing else."""
    name = broker["metadata"]["name"]
    brokers = {"podSelector": {"matchLabels": {names.BROKER_LABEL: name,
                                               "app.kubernetes.io/component": "broker"}}}
    clients = [render_peer(peer) for peer in spec.network.clients]
    rules = [*_rule([names.REMOTING_PORT], [brokers]), *_rule([names.REMOTING_PORT], clients),
             *_external_rule(spec)]
    policy = _policy(broker, names.namesrv_name(name), component="namesrv",
                     pod_labels=namesrv_labels(name), rules=rules)
    policy["metadata"]["labels"][names.BROKER_LABEL] = name
    return policy
