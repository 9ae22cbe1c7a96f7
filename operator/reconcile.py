"""One reconcile pass over a Broker: read what exists, apply what should, report it.

Every pass is idempotent (server-side apply of complete manifests), so the create, update
and resume handlers and the resync timer all run this same function.  API refusals that
retrying cannot fix (422, 403) become condition Degraded; the rest (conflicts, 5xx, lost
connections) propagate for kopf to retry."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import names
from .claim_growth import grow_claims
from .conditions import DEGRADED, Condition, newly_true
from .config_map import build_config_map, http_scheme
from .drain import drain_groups
from .external import (
    build_entry_service,
    build_pod_external_services,
    external_name_server,
    load_balanced,
    load_balancer_address,
)
from .generated_secrets import ensure_secrets
from .group_client import GroupClient, LazyGroupClient, OpenClient
from .group_http_client import open_http_client
from .groups import cluster_spec, clustered, group_view
from .kube import ApiError, KubeApi, object_path
from .live_groups import live_group_count, read_groups
from .name_server import (
    build_namesrv_client_service,
    build_namesrv_deployment,
    build_namesrv_headless_service,
    namesrv_object_names,
)
from .network import (
    build_client_service,
    build_disruption_budget,
    build_headless_service,
    build_notifier_deployment,
    build_notifier_service,
    notifier_object_names,
)
from .network_policy import (
    build_broker_network_policy,
    build_namesrv_network_policy,
    build_notifier_network_policy,
)
from .pod_secrets import secrets_in_use
from .roll_replication import Replicated, replicated_groups, roll_waiting
from .rolls import partition, roll_target
from .settings import OperatorSettings
from .spec import BrokerSpec, SpecError, check_store_settings, parse_spec, store_settings
from .statefulset import (
    build_statefulset,
    decide_replicas,
    keep_immutable_fields,
    live_replicas,
)
from .status import GroupObservation, Observation, build_status, desired_conditions
from .volumes import plan_growth


@dataclasses.dataclass(frozen=True)
class Outcome:
    status: dict[str, Any]
    """The Broker's whole new `.status`."""
    events: list[Condition]
    """Conditions worth a Warning Event (newly Degraded)."""
    result: str
    """ok, degraded or paused (the metrics' label)."""


@dataclasses.dataclass
class Applied:
    statefulsets: list[Mapping[str, Any] | None]
    """Each group's StatefulSet as the last apply answered (or as it was)."""
    config_hash: str
    """Group 0's (each group's config file names its group)."""
    name_servers: Mapping[str, Any] | None = None
    entry: Mapping[str, Any] | None = None
    """The external entry Service as the apply answered (None: off or refused)."""
    waiting_load_balancers: list[str] = dataclasses.field(default_factory=list)
    """LoadBalancer Services not given an address yet (operator/external.py)."""
    scale_down_refused: str = ""
    problems: list[str] = dataclasses.field(default_factory=list)


def pause_state(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[bool, str]:
    if names.annotation_true(metadata, names.PAUSE_ANNOTATION):
        return True, f"annotation {names.PAUSE_ANNOTATION}"
    if spec.get("paused") is True:
        return True, "spec.paused"
    return False, ""


def _parsed(raw_spec: Mapping[str, Any], settings: OperatorSettings) -> tuple[BrokerSpec, str]:
    """The spec and the image, or `SpecError`."""
    spec = parse_spec(raw_spec)
    check_store_settings(store_settings(spec))
    return spec, _image(spec, settings)


async def reconcile(api: KubeApi, broker: Mapping[str, Any], *,
                    settings: OperatorSettings, now: str,
                    open_client: OpenClient | None = None) -> Outcome:
    """`open_client`: the client of the groups' master pods, for the drain and the roll
    (default: HTTP, operator/group_http_client.py)."""
    metadata = broker["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    raw_spec = broker.get("spec") or {}
    paused, pause_source = pause_state(metadata, raw_spec)
    observed: dict[str, Any] = {"generation": int(metadata.get("generation", 0)),
                                "paused": paused, "pause_source": pause_source}
    spec: BrokerSpec | None = None
    image = ""
    try:
        spec, image = _parsed(raw_spec, settings)
    except SpecError as error:
        observed["invalid_spec"] = str(error)
    live_sets, foreign = await read_groups(api, namespace, name, uid=metadata["uid"],
                                           wanted=spec.groups if spec else 1)
    if spec is not None and foreign:
        observed["invalid_spec"] = (
            f"StatefulSet {', '.join(foreign)} exists and is not this Broker's (another "
            f"Broker's name?): its groups are left alone until one of the two is renamed")
        spec = None
    client = _group_client(api, broker, spec, settings=settings, open_client=open_client)
    if spec is not None and not paused:
        drained = await drain_groups(
            api, broker, spec, live_groups=live_group_count(live_sets), now=now,
            scheme=http_scheme(secrets_in_use(name, spec)), client=client)
        live_sets = live_sets[:max(spec.groups, drained.live_groups)]
        observed.update(draining=drained.draining, drain_message=drained.message)
    if spec is not None:
        spec = cluster_spec(spec, live_groups=live_group_count(live_sets))
    group_names = [names.group_name(name, index) for index in range(len(live_sets))]
    selectors = [names.label_selector_text(names.selector_labels(group))
                 for group in group_names]
    claims_path = object_path("v1", "PersistentVolumeClaim", namespace)
    claims: list[Mapping[str, Any]] = [
        claim for selector in selectors
        for claim in await api.list(claims_path, label_selector=selector)]
    in_cluster = spec is not None and clustered(spec)
    observed.update(statefulset=live_sets[0], claims=claims,
                    label_selector=pods_selector(name, clustered=in_cluster))
    if spec is not None and in_cluster:
        observed.update(name_servers_wanted=spec.name_server.replicas, name_servers=await api.get(
            object_path("apps/v1", "Deployment", namespace, names.namesrv_name(name))))
    if spec is not None:
        observed.update(wanted_replicas=spec.replicas,
                        external_name_server=external_name_server(spec))
        if paused:
            observed["growth"] = plan_growth(claims, size=spec.storage.size)
        else:
            replicated = await replicated_groups(
                client, group_names[:spec.groups], live_sets[:spec.groups], namespace=namespace,
                scheme=http_scheme(secrets_in_use(name, spec))) if in_cluster else Replicated()
            applied = await apply_children(api, broker, spec, live_sets, image=image,
                                           operator_namespace=settings.namespace,
                                           replicated=replicated.groups)
            growth, claims, problems = await grow_claims(api, claims_path, selectors, claims,
                                                         size=spec.storage.size)
            live_sets = applied.statefulsets
            observed.update(_applied_observation(spec, applied, replicated, observed),
                            claims=claims, growth=growth, problems=[*applied.problems, *problems])
    observed["groups"] = [GroupObservation(name=group, statefulset=live)
                          for group, live in zip(group_names, live_sets, strict=True)]
    return _outcome(Observation(**observed), old_status=broker.get("status") or {}, now=now)


def _applied_observation(spec: BrokerSpec, applied: Applied, replicated: Replicated,
                         observed: Mapping[str, Any]) -> dict[str, Any]:
    """What a pass that applied the children observes of them."""
    return {"statefulset": applied.statefulsets[0], "config_hash": applied.config_hash,
            "name_servers": applied.name_servers or observed.get("name_servers"),
            "scale_down_refused": applied.scale_down_refused,
            "roll_waiting": roll_waiting(replicated, applied.statefulsets),
            "external_name_server": external_name_server(spec, entry=applied.entry),
            "waiting_load_balancers": applied.waiting_load_balancers}


def _group_client(api: KubeApi, broker: Mapping[str, Any], spec: BrokerSpec | None, *,
                  settings: OperatorSettings, open_client: OpenClient | None) -> GroupClient:
    """Opened at its first call, which only a parsed spec's drain or roll makes."""
    opener: OpenClient = open_client or (lambda b, s: open_http_client(
        api, b, s, timeout_s=settings.group_request_timeout_s))

    async def opened() -> GroupClient:
        assert spec is not None, "asked only of a parsed spec's groups"
        return await opener(broker, spec)

    return LazyGroupClient(opened)


def _outcome(observation: Observation, *, old_status: Mapping[str, Any], now: str) -> Outcome:
    status = build_status(observation, old_status=old_status, now=now)
    event = newly_true(old_status.get("conditions") or [], desired_conditions(observation),
                       DEGRADED)
    degraded = any(c["type"] == DEGRADED and c["status"] == "True"
                   for c in status["conditions"])
    result = "paused" if observation.paused else "degraded" if degraded else "ok"
    return Outcome(status, [event] if event is not None else [], result)


def pods_selector(broker_name: str, *, clustered: bool) -> str:
    """status.labelSelector: the broker pods of every group (one group: its selector)."""
    if not clustered:
        return names.label_selector_text(names.selector_labels(broker_name))
    labels = {**names.selector_labels(broker_name), names.BROKER_LABEL: broker_name}
    del labels["app.kubernetes.io/instance"]
    return names.label_selector_text(labels)


def _image(spec: BrokerSpec, settings: OperatorSettings) -> str:
    image = spec.image or settings.broker_image
    if not image:
        raise SpecError("spec.image is not set and the operator has no default "
                        "(MQSTORE_OPERATOR_BROKER_IMAGE)")
    return image


def children(broker: Mapping[str, Any], spec: BrokerSpec, live_sts: Mapping[str, Any] | None,
             *, image: str, replicas: int, operator_namespace: str | None = None,
             partition: int | None = None,
             external_addresses: Sequence[str] = ()) -> tuple[list[dict[str, Any]], str]:
    """One group's manifests to apply (`broker` is the group's view, operator/groups.py),
    in order (the ConfigMap before the pods that mount it; each pod's external Service
    once the StatefulSet names it), and the config hash."""
    config_map = build_config_map(broker, spec, external_addresses=external_addresses)
    config_hash = config_map["metadata"]["annotations"][names.CONFIG_HASH_ANNOTATION]
    statefulset = build_statefulset(broker, spec, image=image, replicas=replicas,
                                    config_hash=config_hash, partition=partition)
    manifests = [config_map, build_headless_service(broker), build_client_service(broker),
                 build_disruption_budget(broker)]
    if spec.network.policies:  # before the pods, so that none starts unprotected
        manifests.append(build_broker_network_policy(broker, spec,
                                                     operator_namespace=operator_namespace))
    manifests.append(keep_immutable_fields(statefulset, live_sts))
    manifests += build_pod_external_services(broker, spec, replicas=replicas)
    if spec.notifier.replicas > 0:
        if spec.network.policies:
            manifests.append(build_notifier_network_policy(broker, spec))
        manifests += [build_notifier_deployment(broker, spec, image=image,
                                                config_hash=config_hash),
                      build_notifier_service(broker)]
    return manifests, config_hash


def namesrv_children(broker: Mapping[str, Any], spec: BrokerSpec, *,
                     image: str) -> list[dict[str, Any]]:
    """The name servers' manifests: the Services first (the pods' names resolve as soon
    as they are ready), the NetworkPolicy before the pods."""
    manifests = [build_namesrv_headless_service(broker), build_namesrv_client_service(broker)]
    if spec.network.policies:
        manifests.append(build_namesrv_network_policy(broker, spec))
    return [*manifests, build_namesrv_deployment(broker, spec, image=image)]


async def apply_children(api: KubeApi, broker: Mapping[str, Any], spec: BrokerSpec,
                         live_sets: Sequence[Mapping[str, Any] | None], *,
                         image: str, operator_namespace: str | None,
                         replicated: Sequence[bool] = ()) -> Applied:
    """The name servers first (the groups register with them), then every group, then the
    external entry; last, whatever a former spec built and this one does not.
    `replicated`: per group, whether its master has every follower in sync (rolls.py)."""
    metadata = broker["metadata"]
    allowed = names.annotation_true(metadata, names.ALLOW_SCALE_DOWN_ANNOTATION)
    applied = Applied(statefulsets=list(live_sets[:spec.groups]), config_hash="")
    applied.problems += await ensure_secrets(api, broker, spec)
    in_cluster = clustered(spec)
    target = roll_target(live_sets[:spec.groups], replicated) if in_cluster else None
    external: list[str] = []
    if in_cluster:
        for manifest in namesrv_children(broker, spec, image=image):
            answer = await _apply(api, manifest, applied.problems)
            if answer is not None and manifest["kind"] == "Deployment":
                applied.name_servers = answer
    for index in range(spec.groups):
        view = group_view(broker, index, clustered=in_cluster)
        live = live_replicas(live_sets[index])
        replicas = decide_replicas(wanted=spec.replicas, live=live, scale_down_allowed=allowed)
        if replicas != spec.replicas and not applied.scale_down_refused:
            applied.scale_down_refused = (
                f"spec.replicas={spec.replicas} is below the {live} pods running; removing "
                f"pods drops the followers' copies, so it needs the annotation "
                f"{names.ALLOW_SCALE_DOWN_ANNOTATION}: \"true\" (their volumes are kept)")
        external += await _apply_group(
            api, view, spec, live_sets[index], applied, index=index, image=image,
            replicas=replicas, operator_namespace=operator_namespace,
            partition=None if target is None else partition(index, target=target,
                                                            replicas=replicas))
    if spec.network.external.enabled:
        entry = build_entry_service(broker, spec)
        applied.entry = await _apply(api, entry, applied.problems)
        external.append(entry["metadata"]["name"])
        if load_balanced(spec) and load_balancer_address(applied.entry) is None:
            applied.waiting_load_balancers.append(entry["metadata"]["name"])
    await prune_external_services(api, metadata["namespace"], metadata["name"],
                                  keep=frozenset(external))
    namesrv = namesrv_object_names(metadata["name"])
    if not in_cluster:
        await delete_objects(api, metadata["namespace"], namesrv)
    elif not spec.network.policies:
        await delete_objects(api, metadata["namespace"],
                             [obj for obj in namesrv if obj[1] == "NetworkPolicy"])
    return applied


async def _apply_group(api: KubeApi, view: Mapping[str, Any], spec: BrokerSpec,
                       live_sts: Mapping[str, Any] | None, applied: Applied, *, index: int,
                       image: str, replicas: int, operator_namespace: str | None,
                       partition: int | None) -> list[str]:
    """One group's children; the names of its external Services.  With load balancers
    their Services come first, and the rest only once each has an address
    (operator/external.py): the config file lists them."""
    addresses: list[str] = []
    found: dict[str, str | None] = {}
    if load_balanced(spec):
        services = build_pod_external_services(view, spec, replicas=replicas)
        found = {service["metadata"]["name"]: load_balancer_address(
            await _apply(api, service, applied.problems)) for service in services}
        waiting = [name for name, address in found.items() if address is None]
        if waiting:
            applied.waiting_load_balancers += waiting
            return list(found)
        addresses = [address for address in found.values() if address is not None]
    manifests, config_hash = children(
        view, spec, live_sts, image=image, replicas=replicas,
        operator_namespace=operator_namespace, partition=partition,
        external_addresses=addresses)
    applied.config_hash = applied.config_hash or config_hash
    for manifest in manifests:
        if manifest["kind"] == "Service" and manifest["metadata"]["name"] in found:
            continue  # applied above, for its address
        answer = await _apply(api, manifest, applied.problems)
        if answer is not None and manifest["kind"] == "StatefulSet":
            applied.statefulsets[index] = answer
    await _delete_switched_off(api, view, spec)
    return [m["metadata"]["name"] for m in manifests
            if names.EXTERNAL_LABEL in m["metadata"]["labels"]]


async def _apply(api: KubeApi, manifest: Mapping[str, Any],
                 problems: list[str]) -> dict[str, Any] | None:
    """The applied object, or None with the API server's refusal added to `problems`
    (retryable errors propagate)."""
    try:
        return await api.apply(manifest)
    except ApiError as error:
        if error.retryable:
            raise
        problems.append(f"{manifest['kind']} {manifest['metadata']['name']}: {error.message}")
        return None


POLICY_API = "networking.k8s.io/v1"


async def _delete_switched_off(api: KubeApi, view: Mapping[str, Any],
                               spec: BrokerSpec) -> None:
    """A group's extra notifiers at notifier.replicas 0, its NetworkPolicies when
    network.policies is false."""
    namespace, name = view["metadata"]["namespace"], view["metadata"]["name"]
    if spec.notifier.replicas == 0:
        await delete_objects(api, namespace, notifier_object_names(name))
    if not spec.network.policies:
        await delete_objects(api, namespace, [(POLICY_API, "NetworkPolicy", policy) for policy
                                              in (name, names.notifier_name(name))])


async def prune_external_services(api: KubeApi, namespace: str, broker_name: str, *,
                                  keep: frozenset[str]) -> None:
    """Delete the Broker's external Services (label `mqstore.io/external`) not in `keep`:
    all of them once `network.external` is off, a pod's once its pod is gone."""
    path = object_path("v1", "Service", namespace)
    selector = names.label_selector_text({names.EXTERNAL_LABEL: broker_name})
    for service in await api.list(path, label_selector=selector):
        if service["metadata"]["name"] not in keep:
            await api.delete(f"{path}/{service['metadata']['name']}")


async def delete_objects(api: KubeApi, namespace: str,
                         objects: Iterable[tuple[str, str, str]]) -> None:
    """Delete each (apiVersion, kind, name) that exists."""
    for api_version, kind, name in objects:
        await api.delete(object_path(api_version, kind, namespace, name))
