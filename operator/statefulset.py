"""The Broker's StatefulSet: pod 0 is the master, the others followers, each with its own
claim from the volumeClaimTemplate.

A StatefulSet's volumeClaimTemplates cannot change after creation, so storage growth
patches the claims (`volumes.py`) and `keep_immutable_fields` carries the live template
into every later apply."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from . import names
from .pod import broker_pod_spec
from .spec import BrokerSpec


def claim_template(broker_name: str, spec: BrokerSpec) -> dict[str, Any]:
    claim_spec: dict[str, Any] = {"accessModes": list(spec.storage.access_modes),
                                  "resources": {"requests": {"storage": spec.storage.size}}}
    if spec.storage.storage_class_name is not None:
        claim_spec["storageClassName"] = spec.storage.storage_class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": names.DATA_VOLUME,
                         "labels": names.selector_labels(broker_name)},
            "spec": claim_spec}


def build_statefulset(broker: Mapping[str, Any], spec: BrokerSpec, *, image: str,
                      replicas: int, config_hash: str,
                      partition: int | None = None) -> dict[str, Any]:
    """`replicas` is decided by the caller (a refused scale-down keeps the live count), and
    so is `partition` (a cluster's groups roll one at a time, operator/rolls.py; None: no
    partition, as for one group)."""
    assert replicas >= 1
    assert partition is None or 0 <= partition <= replicas
    update_strategy: dict[str, Any] = {"type": "RollingUpdate"}
    if partition is not None:
        update_strategy["rollingUpdate"] = {"partition": partition}
    name = broker["metadata"]["name"]
    selector = names.selector_labels(name)
    pod_labels = {**names.child_labels(broker), **selector}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": names.child_metadata(broker, name),
        "spec": {
            "replicas": replicas,
            "serviceName": names.headless_service_name(name),
            "selector": {"matchLabels": selector},
            # The master first: a follower starts only once pod 0 is ready.
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": update_strategy,
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Delete" if spec.storage.delete_claim else "Retain",
                "whenScaled": "Retain"},
            "template": {
                "metadata": {"labels": pod_labels,
                             "annotations": {names.CONFIG_HASH_ANNOTATION: config_hash}},
                "spec": broker_pod_spec(name, spec, image=image,
                                        namespace=broker["metadata"]["namespace"],
                                        cluster_name=names.cluster_name(broker)),
            },
            "volumeClaimTemplates": [claim_template(name, spec)],
        },
    }


def keep_immutable_fields(desired: dict[str, Any],
                          live: Mapping[str, Any] | None) -> dict[str, Any]:
    """`desired` with the live StatefulSet's volumeClaimTemplates, selector and serviceName
    (the API server refuses to change them; a grown size reaches the claims directly)."""
    if live is None:
        return desired
    merged = copy.deepcopy(desired)
    for field in ("volumeClaimTemplates", "selector", "serviceName"):
        if field in live.get("spec", {}):
            merged["spec"][field] = copy.deepcopy(live["spec"][field])
    for template in merged["spec"].get("volumeClaimTemplates", []):
        template.pop("status", None)  # the API server reports one; applying it is noise
    return merged


def live_replicas(live: Mapping[str, Any] | None) -> int | None:
    if live is None:
        return None
    replicas = live.get("spec", {}).get("replicas")
    return int(replicas) if replicas is not None else 1


def decide_replicas(*, wanted: int, live: int | None, scale_down_allowed: bool) -> int:
    """Scale-down drops the highest pods, and with them the followers' data on the pods'
    volumes, so it needs the allow-scale-down annotation; otherwise the live count stays."""
    if live is None or wanted >= live or scale_down_allowed:
        return wanted
    return live
