"""The Broker's ConfigMap: the one config file (services/common/settings/config_file.py) that the
init container and the three containers read, and the hash that rolls the pods."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from . import names
from .external import external_config
from .pod_secrets import (
    REPLICATION_PATH,
    TLS_DIR,
    USERS_PATH,
    SecretsInUse,
    config_path,
    secrets_in_use,
)
from .spec import BrokerSpec, store_settings

LISTEN_ALL = "0.0.0.0"
"""The pods' listen address (the services' own default is 127.0.0.1)."""

CONFIG_HASH_LENGTH = 16
"""Hex digits of sha256 kept: 64 bits, no collision among a broker's config versions."""


def config_document(spec: BrokerSpec, *, broker_name: str, namespace: str,
                    cluster_name: str | None = None, group_index: int = 0,
                    external_addresses: Sequence[str] = ()) -> dict[str, Any]:
    """The config file as a dict, one for every pod.  The three containers share the pod's
    network namespace, so the notifier reaches the indexer's notice stream on 127.0.0.1.
    Pod 0's writer runs as the master (store.role), every other pod's follows it: the
    writer compares its host name with the master address (`role_by_hostname`), so the
    file does not change with the number of pods and scaling rolls nothing.
    Every listener binds all interfaces (`LISTEN_ALL`): the services default to loopback,
    and in a pod the probes, Prometheus, clients and followers all come from outside (the
    writer's forward listener stays on loopback: only the pod's own notifier uses it); the
    NetworkPolicies decide who gets in.  The Secrets' files are named where
    `pod_secrets.py` mounts them.  In a cluster (`cluster_name` set, operator/groups.py)
    the remoting front registers the group (`broker_name`) with the cluster's name
    servers (over TLS with a TLS Secret); each pod's broker id comes from its pod index
    (operator/addresses.py).  With
    `network.external` the front's external listener advertises group `group_index`'s
    NodePorts, or each pod its load balancer's address of `external_addresses` (pod order;
    the list grows with the pods, so with load balancers scaling a group rolls it)
    (operator/external.py)."""
    in_use = secrets_in_use(broker_name, spec)
    host = LISTEN_ALL
    replication = {"host": host, "port": names.REPLICATION_PORT, "role_by_hostname": True,
                   "master": names.master_address(broker_name, namespace),
                   "secret_file": config_path(REPLICATION_PATH)}
    document: dict[str, Any] = {
        "data_dir": names.DATA_DIR,
        "store": store_settings(spec),
        "replication": replication,
        "writer": {"host": host, "port": names.WRITER_PORT},
        "indexer": {"host": host, "port": names.INDEXER_PORT},
        "notifier": {"host": host, "port": names.NOTIFIER_PORT,
                     "indexer_url": f"{http_scheme(in_use)}://127.0.0.1:{names.INDEXER_PORT}"},
        "remoting": {"host": host, "port": names.REMOTING_PORT},
    }
    if cluster_name is not None:
        document["remoting"].update(
            cluster_name=cluster_name, broker_name=broker_name,
            namesrv_addresses=names.namesrv_address(cluster_name, namespace))
        if in_use.tls is not None:  # the name servers serve only TLS (operator/name_server.py)
            document["remoting"]["namesrv_tls_enabled"] = True
    if spec.network.external.enabled:
        document["remoting"].update(external_config(spec, group_index=group_index,
                                                    addresses=external_addresses))
    if in_use.users is not None:
        document["auth"] = {"users_file": config_path(USERS_PATH)}
    if in_use.tls is not None:
        document["tls"] = {f"{kind}_file": config_path(f"{TLS_DIR}/{key}")
                           for kind, key in (("cert", "tls.crt"), ("key", "tls.key"),
                                             ("ca", "ca.crt"))}
    return document


def http_scheme(in_use: SecretsInUse) -> str:
    """https once a TLS Secret is named: every HTTP listener then speaks TLS."""
    return "https" if in_use.tls is not None else "http"


def render_config(spec: BrokerSpec, *, broker_name: str, namespace: str,
                  cluster_name: str | None = None, group_index: int = 0,
                  external_addresses: Sequence[str] = ()) -> str:
    """The file's text: sorted keys, so equal settings give equal text and an equal hash."""
    document = config_document(spec, broker_name=broker_name, namespace=namespace,
                               cluster_name=cluster_name, group_index=group_index,
                               external_addresses=external_addresses)
    return yaml.safe_dump(document, sort_keys=True, default_flow_style=False)


def config_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:CONFIG_HASH_LENGTH]


def build_config_map(broker: Mapping[str, Any], spec: BrokerSpec, *,
                     external_addresses: Sequence[str] = ()) -> dict[str, Any]:
    text = render_config(spec, broker_name=broker["metadata"]["name"],
                         namespace=broker["metadata"]["namespace"],
                         cluster_name=names.cluster_name(broker),
                         group_index=names.group_index(broker),
                         external_addresses=external_addresses)
    metadata = names.child_metadata(broker, names.config_map_name(broker["metadata"]["name"]))
    metadata["annotations"] = {names.CONFIG_HASH_ANNOTATION: config_hash(text)}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": {names.CONFIG_FILE: text}}
