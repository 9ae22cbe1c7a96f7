"""The pod of a Broker: the writer, indexer and notifier containers on one volume, the
preallocating init container, probes and a locked-down security context."""

from __future__ import annotations

from typing import Any

from . import names
from .addresses import broker_id_env, broker_pod_env
from .pod_secrets import projected_sources, secrets_in_use
from .spec import BrokerSpec, ServiceSpec

RUN_AS_USER = 10001
"""The image's non-root user (Dockerfile); files on the volume belong to its group."""

SHUTDOWN_GRACE_S = 30
"""Kubernetes' default: the writer's 10 s drain (shutdown_timeout_ms) plus its final flush."""

TMP_SIZE_LIMIT = "64Mi"
"""The only writable path besides /data (the root filesystem is read-only)."""

_SERVICES = (("writer", names.WRITER_PORT), ("indexer", names.INDEXER_PORT),
             ("notifier", names.NOTIFIER_PORT))

EXTRA_PORTS = {"writer": (("replication", names.REPLICATION_PORT),),
               "notifier": (("remoting", names.REMOTING_PORT),)}
"""Each service's ports besides its HTTP one: the writer's replication listener, and the
notifier's RocketMQ remoting front (services/notifier/remoting), named so Services target
them by name."""


def external_container_port() -> dict[str, Any]:
    """The remoting front's external listener, with `network.external` (operator/external.py):
    on the notifier of every broker pod and on the name servers."""
    return {"name": names.REMOTING_EXTERNAL_PORT_NAME,
            "containerPort": names.REMOTING_EXTERNAL_PORT, "protocol": "TCP"}


def container_security() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}


def pod_security() -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
            "fsGroup": RUN_AS_USER, "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"}}


def _mounts() -> list[dict[str, Any]]:
    return [{"name": names.DATA_VOLUME, "mountPath": names.DATA_DIR},
            {"name": "config", "mountPath": names.CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"}]


def _command(subcommand: str) -> list[str]:
    return ["mqstore", subcommand, "--config", f"{names.CONFIG_DIR}/{names.CONFIG_FILE}"]


def probe_scheme(spec: BrokerSpec) -> str:
    """HTTPS once a TLS Secret is named (the kubelet does not verify the certificate)."""
    return "HTTPS" if spec.security.tls_secret is not None else "HTTP"


def _probe(path: str, service: str, scheme: str) -> dict[str, Any]:
    return {"path": path, "port": service, "scheme": scheme}


def service_container(*, service: str, port: int, image: str, pull_policy: str,
                      settings: ServiceSpec, scheme: str) -> dict[str, Any]:
    """One service's container: /readyz gates traffic, /healthz restarts a hung process,
    and the startup probe gives recovery of a large log up to 10 minutes."""
    return {
        "name": service,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": _command(service),
        "ports": [{"name": name, "containerPort": number, "protocol": "TCP"}
                  for name, number in ((service, port), *EXTRA_PORTS.get(service, ()))],
        "readinessProbe": {"httpGet": _probe("/readyz", service, scheme),
                           "periodSeconds": 5, "failureThreshold": 2},
        "livenessProbe": {"httpGet": _probe("/healthz", service, scheme),
                          "periodSeconds": 10, "failureThreshold": 6},
        "startupProbe": {"httpGet": _probe("/healthz", service, scheme),
                         "periodSeconds": 5, "failureThreshold": 120},
        "resources": dict(settings.resources),
        "securityContext": container_security(),
        "volumeMounts": _mounts(),
    }


def preallocate_container(*, image: str, pull_policy: str,
                          settings: ServiceSpec) -> dict[str, Any]:
    """`mqstore preallocate`: a new volume gets its first segment before the writer starts
    (and an old one is left alone).  It runs with the writer's resources."""
    return {"name": "preallocate", "image": image, "imagePullPolicy": pull_policy,
            "command": _command("preallocate"), "resources": dict(settings.resources),
            "securityContext": container_security(), "volumeMounts": _mounts()}


def pod_volumes(broker_name: str, spec: BrokerSpec, *,
                cluster_name: str | None = None) -> list[dict[str, Any]]:
    """The config file and the Secrets' files in one projected volume at /etc/mqstore:
    one read-only mount, no volume mounted inside another, and a rotated Secret's files
    are replaced in place by the kubelet.  A cluster's groups (`cluster_name` set) share
    the Broker's Secrets: one set of credentials for every group."""
    config = {"configMap": {"name": names.config_map_name(broker_name)}}
    secrets = projected_sources(secrets_in_use(cluster_name or broker_name, spec))
    return [{"name": "config", "projected": {"sources": [config, *secrets]}},
            {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": TMP_SIZE_LIMIT}}]


def broker_pod_spec(broker_name: str, spec: BrokerSpec, *, namespace: str, image: str,
                    cluster_name: str | None = None) -> dict[str, Any]:
    """Every service container gets the pod's addresses (operator/addresses.py): the
    writer stamps STOREHOST, the notifier answers routes and msg ids with them.  The
    notifier's broker id is the pod's index in a cluster (`cluster_name` set: it registers
    with it) and with external listeners (its external port is the group's plus it)."""
    settings = {"writer": spec.writer, "indexer": spec.indexer, "notifier": spec.notifier}
    containers = [service_container(service=service, port=port, image=image,
                                    pull_policy=spec.image_pull_policy,
                                    settings=settings[service], scheme=probe_scheme(spec))
                  for service, port in _SERVICES]
    external = spec.network.external.enabled
    for container in containers:
        container["env"] = broker_pod_env(broker_name=broker_name, namespace=namespace)
        if container["name"] != "notifier":
            continue
        if cluster_name is not None or external:
            container["env"] += broker_id_env()
        if external:
            container["ports"].append(external_container_port())
    pod: dict[str, Any] = {
        "securityContext": pod_security(),
        "terminationGracePeriodSeconds": SHUTDOWN_GRACE_S,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "containers": containers,
        "volumes": pod_volumes(broker_name, spec, cluster_name=cluster_name),
    }
    if spec.storage.preallocate:
        pod["initContainers"] = [preallocate_container(
            image=image, pull_policy=spec.image_pull_policy, settings=spec.writer)]
    return pod
