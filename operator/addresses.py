"""The addresses each pod gives RocketMQ's clients, set per pod from the downward API.

    variable (setting)                      value in a broker pod
    MQSTORE_STORE__STORE_HOST               $(POD_IP):9876
      (store.store_host)
    MQSTORE_REMOTING__ADVERTISED_ADDRESS    $(POD_NAME).<broker>-headless.<namespace>.svc:9876
      (remoting.advertised_address)

`store.store_host` is the STOREHOST of every record and of every offset msg id: a record
stores it as binary IPv4/IPv6 and a port, so an address, never a name; the pod's IP is
reachable from every pod while the pod lives (a record written before a restart names the
old IP).  `remoting.advertised_address` is the broker address of routes and cluster info:
the pod's stable DNS name through the headless Service, the same after a restart.

`POD_NAME` and `POD_IP` come from the downward API (`metadata.name`, `status.podIP`) and
are listed first: Kubernetes expands `$(VAR)` only from variables defined before it in the
same container.  An IPv6 pod IP also works unbracketed: the port is after the last colon
(storage/format/hosts.py splits there).  The namespace is the Broker's, known when the
manifest is built.

In a cluster (name servers, operator/groups.py) the notifier also registers its pod with
the name servers under its own broker id, the pod's index (pod 0, the master, is 0; the
followers 1..N, which a name server keeps beside the master instead of replacing it):

    MQSTORE_REMOTING__BROKER_ID             metadata.labels['apps.kubernetes.io/pod-index']
      (remoting.broker_id)

The StatefulSet controller sets that label on every pod (Kubernetes 1.28 and later).  With
external listeners (`network.external`, operator/external.py) every broker pod's notifier
gets it too, cluster or not: its external listener advertises the group's NodePort plus
its broker id, its own pod's NodePort.

An extra notifier (notifier.replicas, operator/network.py) has no writer in its pod and
cannot store a send, so it advertises pod 0's name: a client that asks it for a route is
sent to the master, for sends and pulls alike.  Its own STOREHOST is its pod IP (the msg ids
of what it serves name where they were read).  In a cluster it does not register (its
`remoting.namesrv_addresses` is emptied): pod 0 registers that address itself, and a
second registration of it would be dropped from the routes whenever the extra notifier's
connection closes.
"""

from __future__ import annotations

from typing import Any

from . import names

POD_NAME_VARIABLE = "POD_NAME"
POD_IP_VARIABLE = "POD_IP"
STORE_HOST_VARIABLE = "MQSTORE_STORE__STORE_HOST"
ADVERTISED_ADDRESS_VARIABLE = "MQSTORE_REMOTING__ADVERTISED_ADDRESS"
BROKER_ID_VARIABLE = "MQSTORE_REMOTING__BROKER_ID"
NAMESRV_ADDRESSES_VARIABLE = "MQSTORE_REMOTING__NAMESRV_ADDRESSES"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def _field(variable: str, field_path: str) -> dict[str, Any]:
    return {"name": variable, "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                         "fieldPath": field_path}}}


def store_host_env() -> list[dict[str, Any]]:
    """POD_IP, then the STOREHOST built from it (`$(POD_IP)` is expanded by the kubelet)."""
    return [_field(POD_IP_VARIABLE, "status.podIP"),
            {"name": STORE_HOST_VARIABLE,
             "value": f"$({POD_IP_VARIABLE}):{names.REMOTING_PORT}"}]


def advertised_address(pod_name: str, *, broker_name: str, namespace: str) -> str:
    """`<pod>.<broker>-headless.<namespace>.svc:9876` (`pod_name` may be `$(POD_NAME)`)."""
    host = names.pod_host_name(pod_name, broker_name=broker_name, namespace=namespace)
    return f"{host}:{names.REMOTING_PORT}"


def broker_pod_env(*, broker_name: str, namespace: str) -> list[dict[str, Any]]:
    """The env of every service container of a broker pod: the pod's own addresses."""
    own = advertised_address(f"$({POD_NAME_VARIABLE})", broker_name=broker_name,
                             namespace=namespace)
    return [_field(POD_NAME_VARIABLE, "metadata.name"), *store_host_env(),
            {"name": ADVERTISED_ADDRESS_VARIABLE, "value": own}]


def broker_id_env() -> list[dict[str, Any]]:
    """A cluster's notifier in a broker pod: the pod's index is its broker id."""
    return [_field(BROKER_ID_VARIABLE, f"metadata.labels['{POD_INDEX_LABEL}']")]


def extra_notifier_env(*, broker_name: str, namespace: str,
                       clustered: bool = False) -> list[dict[str, Any]]:
    """The env of an extra notifier: its own STOREHOST, and pod 0 (the master) advertised;
    in a cluster, no registration (pod 0 registers that address)."""
    master = advertised_address(f"{broker_name}-0", broker_name=broker_name,
                                namespace=namespace)
    env = [*store_host_env(), {"name": ADVERTISED_ADDRESS_VARIABLE, "value": master}]
    if clustered:
        env.append({"name": NAMESRV_ADDRESSES_VARIABLE, "value": ""})
    return env
