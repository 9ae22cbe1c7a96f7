"""The Broker's Services, PodDisruptionBudget and the extra notifiers' Deployment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import names
from .addresses import extra_notifier_env
from .pod import pod_security, pod_volumes, probe_scheme, service_container
from .spec import BrokerSpec

MASTER_POD_LABEL = "statefulset.kubernetes.io/pod-name"


def _ports(*services: tuple[str, int]) -> list[dict[str, Any]]:
    return [{"name": service, "port": port, "targetPort": service, "protocol": "TCP"}
            for service, port in services]


ALL_PORTS = (("writer", names.WRITER_PORT), ("indexer", names.INDEXER_PORT),
             ("notifier", names.NOTIFIER_PORT), ("remoting", names.REMOTING_PORT))
"""The client Service's and the headless Service's ports: HTTP of the three services and
the notifier's RocketMQ remoting front (a RocketMQ client's name server address is
`<broker>.<namespace>.svc:9876`; routes then name each pod through the headless Service,
operator/addresses.py)."""


def build_headless_service(broker: Mapping[str, Any]) -> dict[str, Any]:
    """Stable DNS for every pod (`<broker>-0.<broker>-headless`), ready or not, which is what
    followers (on the replication port), the StatefulSet and RocketMQ's clients (on the
    remoting port, the address each pod advertises) need."""
    name = broker["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": names.child_metadata(broker, names.headless_service_name(name)),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": names.selector_labels(name),
                     "ports": _ports(*ALL_PORTS, ("replication", names.REPLICATION_PORT))}}


def build_client_service(broker: Mapping[str, Any]) -> dict[str, Any]:
    """What producers and consumers use: the master's (pod 0's) writer and notifier, and
    its remoting front as RocketMQ clients' name server."""
    name = broker["metadata"]["name"]
    selector = {**names.selector_labels(name), MASTER_POD_LABEL: f"{name}-0"}
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": names.child_metadata(broker, name),
            "spec": {"type": "ClusterIP", "selector": selector, "ports": _ports(*ALL_PORTS)}}


def build_disruption_budget(broker: Mapping[str, Any]) -> dict[str, Any]:
    """At most one broker pod evicted at a time (a one-pod broker can still be drained)."""
    name = broker["metadata"]["name"]
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": names.child_metadata(broker, name),
            "spec": {"maxUnavailable": 1,
                     "selector": {"matchLabels": names.selector_labels(name)}}}


def notifier_labels(broker_name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "mqstore", "app.kubernetes.io/instance": broker_name,
            "app.kubernetes.io/component": "notifier"}


def build_notifier_deployment(broker: Mapping[str, Any], spec: BrokerSpec, *, image: str,
                              config_hash: str) -> dict[str, Any]:
    """`notifier.replicas` extra notifiers on the master's claim (ReadWriteMany: the CRD
    refuses replicas > 0 otherwise); they write only consumer offsets."""
    assert spec.notifier.replicas > 0
    name = broker["metadata"]["name"]
    labels = notifier_labels(name)
    container = service_container(service="notifier", port=names.NOTIFIER_PORT, image=image,
                                  pull_policy=spec.image_pull_policy, settings=spec.notifier,
                                  scheme=probe_scheme(spec))
    # Not in the master's pod: its indexer's notice stream is reached through the
    # headless Service (the config file's 127.0.0.1 is overridden).
    indexer_url = (f"{probe_scheme(spec).lower()}://{name}-0."
                   f"{names.headless_service_name(name)}:{names.INDEXER_PORT}")
    container["env"] = [{"name": "MQSTORE_NOTIFIER__INDEXER_URL", "value": indexer_url},
                        *extra_notifier_env(
                            broker_name=name, namespace=broker["metadata"]["namespace"],
                            clustered=names.cluster_name(broker) is not None)]
    volumes = [*pod_volumes(name, spec, cluster_name=names.cluster_name(broker)),
               {"name": names.DATA_VOLUME,
                "persistentVolumeClaim": {"claimName": names.claim_name(name, 0)}}]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": names.child_metadata(broker, names.notifier_name(name),
                                         component="notifier"),
        "spec": {
            "replicas": spec.notifier.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": {**names.child_labels(broker, "notifier"), **labels},
                             "annotations": {names.CONFIG_HASH_ANNOTATION: config_hash}},
                "spec": {"securityContext": pod_security(), "enableServiceLinks": False,
                         "automountServiceAccountToken": False,
                         "containers": [container], "volumes": volumes},
            },
        },
    }


def build_notifier_service(broker: Mapping[str, Any]) -> dict[str, Any]:
    """The extra notifiers' HTTP port.  Not their remoting port: their routes name pod 0
    (operator/addresses.py), so the client Service is the one name server address."""
    name = broker["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": names.child_metadata(broker, names.notifier_name(name),
                                             component="notifier"),
            "spec": {"type": "ClusterIP", "selector": notifier_labels(name),
                     "ports": _ports(("notifier", names.NOTIFIER_PORT))}}


def notifier_object_names(broker_name: str) -> list[tuple[str, str, str]]:
    """(apiVersion, kind, name) of the extra notifiers' objects: deleted at replicas 0."""
    name = names.notifier_name(broker_name)
    return [("apps/v1", "Deployment", name), ("v1", "Service", name),
            ("networking.k8s.io/v1", "NetworkPolicy", name)]
