"""Names, labels and annotations the operator and its children share (one spelling each)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GROUP = "mqstore.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Broker"
PLURAL = "brokers"

FIELD_MANAGER = "mqstore-operator"
"""The server-side apply field manager: the fields the operator owns on its children."""

PAUSE_ANNOTATION = f"{GROUP}/pause-reconciliation"
"""`"true"` on a Broker: leave its children alone (like spec.paused)."""
ALLOW_SCALE_DOWN_ANNOTATION = f"{GROUP}/allow-scale-down"
"""`"true"` on a Broker: lowering spec.replicas removes the highest pods (their volumes stay)."""
CONFIG_HASH_ANNOTATION = f"{GROUP}/config-hash"
"""On the pod template: a changed config file changes it, and so rolls the pods."""

BROKER_LABEL = f"{GROUP}/broker"
"""On every child of a cluster (a Broker with name servers): the Broker's name, so
`kubectl get pods -l mqstore.io/broker=<broker>` lists every group's pods and the name
servers.  A one-group Broker without name servers has no such label (its children stay as
they were before clusters existed)."""
CLUSTER_KEY = "cluster"
"""In a group's view of its Broker (operator/groups.py): `{"name": <the Broker's name>,
"index": <the group's index>}`.  Never sent to the API server."""
EXTERNAL_LABEL = f"{GROUP}/external"
"""On every external Service (operator/external.py): the Broker's name, so that those no
longer wanted are found by one list and deleted."""

DATA_VOLUME = "data"
"""The volumeClaimTemplate's name: claims are `data-<broker>-<ordinal>`."""
CONFIG_FILE = "mqstore.yaml"
CONFIG_DIR = "/etc/mqstore"
DATA_DIR = "/data"

WRITER_PORT = 8081
INDEXER_PORT = 8082
NOTIFIER_PORT = 8083
REPLICATION_PORT = 8084
"""The writer's replication port on a master (followers connect to pod 0's)."""
REMOTING_PORT = 9876
"""The notifier's RocketMQ remoting front (name-server and broker codes on one port)."""
REMOTING_EXTERNAL_PORT = 9877
"""The remoting front's external listener (`remoting.external_port`, the services'
default), and the name server's (`--external-port`): what a NodePort leads to."""
REMOTING_EXTERNAL_PORT_NAME = "remoting-ext"


def selector_labels(broker_name: str) -> dict[str, str]:
    """The labels that pick a Broker's pods (StatefulSet selector, Services, PDB, claims)."""
    return {"app.kubernetes.io/name": "mqstore", "app.kubernetes.io/instance": broker_name,
            "app.kubernetes.io/component": "broker"}


def common_labels(broker_name: str, component: str = "broker") -> dict[str, str]:
    return {"app.kubernetes.io/name": "mqstore", "app.kubernetes.io/instance": broker_name,
            "app.kubernetes.io/component": component, "app.kubernetes.io/part-of": "mqstore",
            "app.kubernetes.io/managed-by": FIELD_MANAGER}


def cluster_name(broker: Mapping[str, Any]) -> str | None:
    """The Broker's name if `broker` is a group's view of a cluster, else None."""
    cluster = broker.get(CLUSTER_KEY)
    return None if cluster is None else str(cluster["name"])


def group_index(broker: Mapping[str, Any]) -> int:
    """The group a (group's view of a) Broker is: 0 for a Broker itself."""
    cluster = broker.get(CLUSTER_KEY)
    return 0 if cluster is None else int(cluster.get("index", 0))


def child_labels(broker: Mapping[str, Any], component: str = "broker") -> dict[str, str]:
    """`common_labels` of the (group's) name, and BROKER_LABEL in a cluster."""
    labels = common_labels(broker["metadata"]["name"], component)
    cluster = cluster_name(broker)
    if cluster is not None:
        labels[BROKER_LABEL] = cluster
    return labels


def label_selector_text(labels: Mapping[str, str]) -> str:
    """`a=b,c=d`, sorted: the form of status.labelSelector and list queries."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def headless_service_name(broker_name: str) -> str:
    return f"{broker_name}-headless"


def group_name(broker_name: str, index: int) -> str:
    """Group 0 has the Broker's own name (a one-group Broker's objects and claims become
    group 0 of a cluster unchanged); group g >= 1 is `<broker>-g<g>`."""
    assert index >= 0
    return broker_name if index == 0 else f"{broker_name}-g{index}"


def namesrv_name(broker_name: str) -> str:
    """The name servers' Deployment and the ClusterIP Service clients are given."""
    return f"{broker_name}-namesrv"


def namesrv_headless_service_name(broker_name: str) -> str:
    return f"{broker_name}-namesrv-headless"


def namesrv_address(broker_name: str, namespace: str) -> str:
    """What every group registers with: the headless Service's name, which resolves to
    every ready name-server pod (the registrar resolves it again each round)."""
    return f"{namesrv_headless_service_name(broker_name)}.{namespace}.svc:{REMOTING_PORT}"


def namesrv_client_address(broker_name: str, namespace: str) -> str:
    """What clients are given: the ClusterIP Service (any name server answers every
    route)."""
    return f"{namesrv_name(broker_name)}.{namespace}.svc:{REMOTING_PORT}"


def external_service_name(broker_name: str) -> str:
    """The NodePort Service clients outside are given as name server (operator/external.py)."""
    return f"{broker_name}-external"


def pod_external_service_name(group_name: str, pod_index: int) -> str:
    """The NodePort Service of one broker pod: `<group>-<i>-external`."""
    return f"{group_name}-{pod_index}-external"


def config_map_name(broker_name: str) -> str:
    return f"{broker_name}-config"


def notifier_name(broker_name: str) -> str:
    return f"{broker_name}-notifier"


def pod_host_name(pod_name: str, *, broker_name: str, namespace: str) -> str:
    """A pod's stable DNS name through the headless Service, `<pod>.<broker>-headless.
    <namespace>.svc`, which every pod of the cluster resolves whatever the cluster domain
    (the pods' resolver search list ends in `svc.<domain>`)."""
    return f"{pod_name}.{headless_service_name(broker_name)}.{namespace}.svc"


def master_address(broker_name: str, namespace: str) -> str:
    """Pod 0's replication endpoint through the headless Service.  Its first DNS label is
    pod 0's host name, which is how each writer tells whether it is the master
    (`replication.role_by_hostname`)."""
    host = pod_host_name(f"{broker_name}-0", broker_name=broker_name, namespace=namespace)
    return f"{host}:{REPLICATION_PORT}"


def claim_name(broker_name: str, ordinal: int) -> str:
    """The StatefulSet controller's name for pod `ordinal`'s claim."""
    return f"{DATA_VOLUME}-{broker_name}-{ordinal}"


def owner_reference(broker: Mapping[str, Any]) -> dict[str, Any]:
    """Makes a child garbage-collected with its Broker (the real one, for a group's view:
    the uid is the Broker's in both)."""
    metadata = broker["metadata"]
    name = cluster_name(broker) or metadata["name"]
    return {"apiVersion": API_VERSION, "kind": KIND, "name": name,
            "uid": metadata["uid"], "controller": True, "blockOwnerDeletion": True}


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether `obj` names the object of `uid` among its owners."""
    references = obj.get("metadata", {}).get("ownerReferences") or []
    return any(reference.get("uid") == uid for reference in references)


def child_metadata(broker: Mapping[str, Any], name: str, *,
                   component: str = "broker") -> dict[str, Any]:
    return {"name": name, "namespace": broker["metadata"]["namespace"],
            "labels": child_labels(broker, component),
            "ownerReferences": [owner_reference(broker)]}


def annotation_true(metadata: Mapping[str, Any], key: str) -> bool:
    annotations = metadata.get("annotations") or {}
    return str(annotations.get(key, "")).strip().lower() == "true"
