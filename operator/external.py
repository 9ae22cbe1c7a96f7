"""Listeners for clients outside the cluster network (`spec.network.external`), as Strimzi
offers them for Kafka: a NodePort (or LoadBalancer, below) Service per broker pod, and one
for the cluster's name server, all reached at `<host>:<nodePort>`.  A RocketMQ client
outside is given `<host>:<nodePortBase>` as its name server and nothing else.

The NodePorts, from `b` = nodePortBase (`entry_node_port`, `pod_node_port`):

| NodePort | Service | selects | target |
|---|---|---|---|
| b | `<broker>-external` | the name servers (nameServer.replicas >= 1), else pod 0 | 9877 |
| b + 1 + 16 g + i | `<group>-<i>-external` | group g's pod i (`<group>-<i>`) | 9877 |

16 is the CRD's maximum of replicas (`REPLICAS_MAX`), so no two groups share a port; the
largest cluster (16 groups of 16 pods) takes 257 ports from b, and b <= 32511 keeps the
last, b + 256, within Kubernetes' default NodePort range 30000..32767.  The ports belong
to the whole Kubernetes cluster: two Brokers need ranges that do not meet (the API server
refuses a taken port, reported as condition Degraded, ChangeRefused).

Each group's config file (operator/config_map.py) turns on the notifier's external
listener on 9877 (`remoting.external_*`, docs/remoting.md) advertising
`<host>:<b + 1 + 16 g>` plus the pod's broker id: the pods of a group share the file, and
each pod's broker id is its pod index (`MQSTORE_REMOTING__BROKER_ID`, operator/addresses.py,
set with external listeners even without name servers), so each advertises its own NodePort.
The path of a client outside:

1. it asks `<host>:b` for a route: the name servers' external listener
   (`mqstore namesrv --external-port 9877`) names each broker by the external address the
   broker registered; without name servers pod 0's own front answers for its group;
2. the route names group g's master as `<host>:<b + 1 + 16 g>`, and every send, pull and
   heartbeat goes there, through that pod's Service to its external listener.

The listener serves the same requests with the same TLS and users file as 9876; the
NetworkPolicies admit 9877 from anywhere (operator/network_policy.py), since that traffic
arrives from the nodes, with the clients' addresses hidden.

Extra notifiers (notifier.replicas) read their group's file and open the listener too,
advertising pod 0's NodePort as they advertise pod 0 inside; no Service leads to them.

With `type: LoadBalancer` the same Services are of type LoadBalancer instead (no NodePort
is allocated), each on port 9877, and what a client is given comes from their status: a
load balancer controller (a cloud's, MetalLB) fills `status.loadBalancer.ingress` with an
address, and

* group g's config file lists every pod's `<address>:9877` in pod order
  (`remoting.external_advertised_addresses`), so each pod advertises its own;
* `status.external.nameServer` is the entry Service's `<address>:9877`.

An address is known only once the controller has given it, so a group's config file and
pods are applied only once every one of its Services has one (operator/reconcile.py):
until then the Broker is Progressing `WaitingForLoadBalancers`, as Strimzi waits for its
listeners' addresses before it configures the brokers.  A new address (a load balancer
recreated) changes the config file and rolls the group.

Every external Service carries `mqstore.io/external: <broker>`: the reconcile pass lists
them and deletes those not built (external switched off, fewer pods)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import names
from .name_server import namesrv_labels
from .network import MASTER_POD_LABEL
from .spec import (
    GROUPS_MAX,
    NODE_PORT_BASE_MAX,
    NODE_PORT_MAX,
    NODE_PORT_MIN,
    REPLICAS_MAX,
    BrokerSpec,
)

TRAFFIC_POLICY = "Cluster"
"""Every node forwards a NodePort to the selected pod wherever it runs, so one `host` (any
node, or a name for all of them) reaches every pod; `Local` would answer only on the node
that runs the pod and drop the connection elsewhere.  The price, with kube-proxy in
iptables mode: a connection forwarded to a pod on another node (or from the node itself)
is masqueraded, and the pod sees a node's address, not the client's; the users file and
TLS, not an address rule, are what guard the external listener."""


def entry_node_port(node_port_base: int) -> int:
    """The cluster's name-server entry: `<host>:<this>` is what clients outside are given."""
    assert NODE_PORT_MIN <= node_port_base <= NODE_PORT_BASE_MAX
    return node_port_base


def pod_node_port(node_port_base: int, *, group_index: int, pod_index: int) -> int:
    """Pod `pod_index` of group `group_index`: base + 1 + 16 g + i."""
    assert NODE_PORT_MIN <= node_port_base <= NODE_PORT_BASE_MAX
    assert 0 <= group_index < GROUPS_MAX
    assert 0 <= pod_index < REPLICAS_MAX
    port = node_port_base + 1 + REPLICAS_MAX * group_index + pod_index
    assert port <= NODE_PORT_MAX
    return port


def load_balanced(spec: BrokerSpec) -> bool:
    """External listeners behind load balancers (`network.external.type: LoadBalancer`)."""
    return spec.network.external.enabled and spec.network.external.type == "LoadBalancer"


def load_balancer_address(live: Mapping[str, Any] | None) -> str | None:
    """`<ip or hostname>:9877` of a LoadBalancer Service as its controller reported it
    (the first ingress), or None before it has."""
    ingress = ((live or {}).get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    if not ingress:
        return None
    host = ingress[0].get("ip") or ingress[0].get("hostname")
    if not host:
        return None
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{names.REMOTING_EXTERNAL_PORT}"


def external_name_server(spec: BrokerSpec, *, entry: Mapping[str, Any] | None = None) -> str:
    """What clients outside are given (status.external.nameServer): `<host>:<nodePortBase>`,
    or the entry load balancer's address (`entry`: its live Service); "" when off or not
    given an address yet."""
    external = spec.network.external
    if not external.enabled:
        return ""
    if load_balanced(spec):
        return load_balancer_address(entry) or ""
    return f"{external.host}:{entry_node_port(external.node_port_base)}"


def external_config(spec: BrokerSpec, *, group_index: int,
                    addresses: Sequence[str] = ()) -> dict[str, object]:
    """The `remoting:` settings of group `group_index`'s config file; `addresses`: with
    load balancers, every pod's, in pod order."""
    external = spec.network.external
    assert external.enabled
    if load_balanced(spec):
        assert addresses, "a load-balanced group's file is built once its addresses are known"
        return {"external_enabled": True, "external_port": names.REMOTING_EXTERNAL_PORT,
                "external_advertised_address": addresses[0],
                "external_advertised_addresses": ";".join(addresses)}
    port = pod_node_port(external.node_port_base, group_index=group_index, pod_index=0)
    return {"external_enabled": True, "external_port": names.REMOTING_EXTERNAL_PORT,
            "external_advertised_address": f"{external.host}:{port}",
            "external_advertised_port_plus_broker_id": True}


def _service(metadata: dict[str, Any], *, cluster_name: str, selector: Mapping[str, str],
             node_port: int | None) -> dict[str, Any]:
    """A NodePort Service on `node_port`, or with None a LoadBalancer Service (no NodePort
    allocated: nothing reaches it but through its load balancer)."""
    metadata["labels"][names.EXTERNAL_LABEL] = cluster_name
    port: dict[str, Any] = {
        "name": names.REMOTING_EXTERNAL_PORT_NAME, "port": names.REMOTING_EXTERNAL_PORT,
        "targetPort": names.REMOTING_EXTERNAL_PORT_NAME, "protocol": "TCP"}
    spec: dict[str, Any] = {"type": "NodePort", "externalTrafficPolicy": TRAFFIC_POLICY,
                            "selector": dict(selector), "ports": [port]}
    if node_port is None:
        spec.update(type="LoadBalancer", allocateLoadBalancerNodePorts=False)
    else:
        port["nodePort"] = node_port
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def build_pod_external_services(view: Mapping[str, Any], spec: BrokerSpec, *,
                                replicas: int) -> list[dict[str, Any]]:
    """One Service per pod of the group `view` (operator/groups.py), each selecting its pod
    by the StatefulSet's pod-name label; none when external listeners are off."""
    external = spec.network.external
    if not external.enabled:
        return []
    group = view["metadata"]["name"]
    group_index = names.group_index(view)
    cluster_name = names.cluster_name(view) or group
    services = []
    for pod_index in range(replicas):
        pod = f"{group}-{pod_index}"
        services.append(_service(
            names.child_metadata(view, names.pod_external_service_name(group, pod_index)),
            cluster_name=cluster_name,
            selector={**names.selector_labels(group), MASTER_POD_LABEL: pod},
            node_port=None if load_balanced(spec) else pod_node_port(
                external.node_port_base, group_index=group_index, pod_index=pod_index)))
    return services


def build_entry_service(broker: Mapping[str, Any], spec: BrokerSpec) -> dict[str, Any]:
    """`<broker>-external`: the name servers' external listener, or, without name servers,
    group 0's pod 0 (its front answers name-server requests itself)."""
    external = spec.network.external
    assert external.enabled
    name = broker["metadata"]["name"]
    if spec.name_server.replicas > 0:
        metadata = names.child_metadata(broker, names.external_service_name(name),
                                        component="namesrv")
        metadata["labels"][names.BROKER_LABEL] = name
        selector = namesrv_labels(name)
    else:
        metadata = names.child_metadata(broker, names.external_service_name(name))
        selector = {**names.selector_labels(name), MASTER_POD_LABEL: f"{name}-0"}
    return _service(metadata, cluster_name=name, selector=selector,
                    node_port=None if load_balanced(spec) else entry_node_port(
                        external.node_port_base))
