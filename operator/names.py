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


def selector_labels(broker_name: str) -> dict[str, str]:
    """The labels that pick a Broker's pods (StatefulSet selector, Services, PDB, claims)."""
    return {"app.kubernetes.io/name": "mqstore", "app.kubernetes.io/instance": broker_name,
            "app.kubernetes.io/component": "broker"}


def common_labels(broker_name: str, component: str = "broker") -> dict[str, str]:
    return {"app.kubernetes.io/name": "mqstore", "app.kubernetes.io/instance": broker_name,
            "app.kubernetes.io/component": component, "app.kubernetes.io/part-of": "mqstore",
            "app.kubernetes.io/managed-by": FIELD_MANAGER}


def label_selector_text(labels: Mapping[str, str]) -> str:
    """`a=b,c=d`, sorted: the form of status.labelSelector and list queries."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def headless_service_name(broker_name: str) -> str:
    return f"{broker_name}-headless"


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
    """Makes a child garbage-collected with its Broker."""
    metadata = broker["metadata"]
    return {"apiVersion": API_VERSION, "kind": KIND, "name": metadata["name"],
            "uid": metadata["uid"], "controller": True, "blockOwnerDeletion": True}


def child_metadata(broker: Mapping[str, Any], name: str, *,
                   component: str = "broker") -> dict[str, Any]:
    return {"name": name, "namespace": broker["metadata"]["namespace"],
            "labels": common_labels(broker["metadata"]["name"], component),
            "ownerReferences": [owner_reference(broker)]}


def annotation_true(metadata: Mapping[str, Any], key: str) -> bool:
    annotations = metadata.get("annotations") or {}
    return str(annotations.get(key, "")).strip().lower() == "true"
