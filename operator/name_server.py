"""The cluster's name servers (`spec.nameServer.replicas` >= 1): `mqstore namesrv` pods in
a Deployment, and two Services on their remoting port (9876).

| object | name | who uses it |
|---|---|---|
| Deployment | `<broker>-namesrv` | `mqstore namesrv --host 0.0.0.0 --port 9876` |
| headless Service | `<broker>-namesrv-headless` | every group registers with each of its pods |
| ClusterIP Service | `<broker>-namesrv` | clients: `<broker>-namesrv.<namespace>.svc:9876` |
| NetworkPolicy | `<broker>-namesrv` | with network.policies: the groups' pods and clients |
| NodePort Service | `<broker>-external` | with network.external: clients outside |

The name servers hold no state on disk (the brokers register again every 30 s), so a
Deployment, and scaling it restarts no broker: the registrar resolves the headless name
again at each round (services/notifier/remoting/registrar.py).  The headless Service lists
only ready pods, so a broker registers with a name server that is listening.

With `network.external` the name servers also listen on 9877 (`--external-port`) for
clients outside the cluster network, behind `<broker>-external` (operator/external.py).

With `security.tlsSecret` the name servers mount the Secret read-only at /etc/mqstore/tls,
as the brokers' pods do, and serve only TLS on both ports (`--tls-cert-file`,
`--tls-key-file`); the groups register over TLS (`remoting.namesrv_tls_enabled`,
operator/config_map.py).  The TCP probes only connect, which a TLS listener accepts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import names
from .pod import TMP_SIZE_LIMIT, container_security, external_container_port, pod_security
from .pod_secrets import TLS_DIR, config_path, secrets_in_use, tls_volume_source
from .spec import BrokerSpec

COMPONENT = "namesrv"

PROBE_TCP = {"tcpSocket": {"port": "remoting"}}
"""The name server has no HTTP port: a probe that connects is the readiness it has."""


def namesrv_labels(broker_name: str) -> dict[str, str]:
    """The name-server pods' selector."""
    return {"app.kubernetes.io/name": "mqstore", "app.kubernetes.io/instance": broker_name,
            "app.kubernetes.io/component": COMPONENT}


def _metadata(broker: Mapping[str, Any], name: str) -> dict[str, Any]:
    metadata = names.child_metadata(broker, name, component=COMPONENT)
    metadata["labels"][names.BROKER_LABEL] = broker["metadata"]["name"]
    return metadata


def _port() -> list[dict[str, Any]]:
    return [{"name": "remoting", "port": names.REMOTING_PORT, "targetPort": "remoting",
             "protocol": "TCP"}]


def namesrv_container(spec: BrokerSpec, *, image: str, tls: bool = False) -> dict[str, Any]:
    """With `network.external` a second listener on 9877, whose routes name each broker by
    the external address it registered (operator/external.py); with `tls`, both listeners
    serve the mounted Secret's certificate."""
    command = ["mqstore", "namesrv", "--host", "0.0.0.0", "--port", str(names.REMOTING_PORT)]
    ports = [{"name": "remoting", "containerPort": names.REMOTING_PORT, "protocol": "TCP"}]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    if spec.network.external.enabled:
        command += ["--external-port", str(names.REMOTING_EXTERNAL_PORT)]
        ports.append(external_container_port())
    if tls:
        command += ["--tls-cert-file", config_path(f"{TLS_DIR}/tls.crt"),
                    "--tls-key-file", config_path(f"{TLS_DIR}/tls.key")]
        mounts.append({"name": "tls", "mountPath": config_path(TLS_DIR), "readOnly": True})
    return {
        "name": COMPONENT,
        "image": image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": command,
        "ports": ports,
        "readinessProbe": {**PROBE_TCP, "periodSeconds": 5, "failureThreshold": 2},
        "livenessProbe": {**PROBE_TCP, "periodSeconds": 10, "failureThreshold": 6},
        "resources": dict(spec.name_server.resources),
        "securityContext": container_security(),
        "volumeMounts": mounts,
    }


def build_namesrv_deployment(broker: Mapping[str, Any], spec: BrokerSpec, *,
                             image: str) -> dict[str, Any]:
    assert spec.name_server.replicas > 0
    name = broker["metadata"]["name"]
    metadata = _metadata(broker, names.namesrv_name(name))
    tls = secrets_in_use(name, spec).tls
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {
        "medium": "Memory", "sizeLimit": TMP_SIZE_LIMIT}}]
    if tls is not None:
        volumes.append({"name": "tls", "projected": {"sources": [tls_volume_source(tls)]}})
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
        "spec": {
            "replicas": spec.name_server.replicas,
            "selector": {"matchLabels": namesrv_labels(name)},
            "template": {
                "metadata": {"labels": {**metadata["labels"], **namesrv_labels(name)}},
                "spec": {"securityContext": pod_security(), "enableServiceLinks": False,
                         "automountServiceAccountToken": False,
                         "containers": [namesrv_container(spec, image=image,
                                                          tls=tls is not None)],
                         "volumes": volumes},
            },
        },
    }


def build_namesrv_headless_service(broker: Mapping[str, Any]) -> dict[str, Any]:
    """Ready pods only (publishNotReadyAddresses false): what the groups register with."""
    name = broker["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _metadata(broker, names.namesrv_headless_service_name(name)),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": False,
                     "selector": namesrv_labels(name), "ports": _port()}}


def build_namesrv_client_service(broker: Mapping[str, Any]) -> dict[str, Any]:
    """The one address clients are given for the whole cluster."""
    name = broker["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _metadata(broker, names.namesrv_name(name)),
            "spec": {"type": "ClusterIP", "selector": namesrv_labels(name),
                     "ports": _port()}}


def namesrv_object_names(broker_name: str) -> list[tuple[str, str, str]]:
    """(apiVersion, kind, name) of every name-server object (with its NetworkPolicy,
    operator/network_policy.py): deleted at replicas 0."""
    name = names.namesrv_name(broker_name)
    return [("apps/v1", "Deployment", name), ("v1", "Service", name),
            ("v1", "Service", names.namesrv_headless_service_name(broker_name)),
            ("networking.k8s.io/v1", "NetworkPolicy", name)]
