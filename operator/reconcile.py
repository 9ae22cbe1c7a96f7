"""One reconcile pass over a Broker: read what exists, apply what should, report it.

Every pass is idempotent (server-side apply of complete manifests), so the create, update
and resume handlers and the resync timer all run this same function.  API refusals that
retrying cannot fix (422, 403) become condition Degraded; the rest (conflicts, 5xx, lost
connections) propagate for kopf to retry."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from . import names
from .conditions import DEGRADED, Condition, newly_true
from .config_map import build_config_map
from .kube import ApiError, KubeApi, object_path
from .network import (
    build_client_service,
    build_disruption_budget,
    build_headless_service,
    build_notifier_deployment,
    build_notifier_service,
)
from .network_policy import build_broker_network_policy, build_notifier_network_policy
from .pod_secrets import RANDOM_BYTES, build_generated_secret, secret_problem, secrets_in_use
from .settings import OperatorSettings
from .spec import BrokerSpec, SpecError, check_store_settings, parse_spec, store_settings
from .statefulset import (
    build_statefulset,
    decide_replicas,
    keep_immutable_fields,
    live_replicas,
)
from .status import Observation, build_status, desired_conditions
from .volumes import GrowthPlan, plan_growth


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
    statefulset: Mapping[str, Any] | None
    config_hash: str
    scale_down_refused: str = ""
    problems: list[str] = dataclasses.field(default_factory=list)


def pause_state(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[bool, str]:
    if names.annotation_true(metadata, names.PAUSE_ANNOTATION):
        return True, f"annotation {names.PAUSE_ANNOTATION}"
    if spec.get("paused") is True:
        return True, "spec.paused"
    return False, ""


async def reconcile(api: KubeApi, broker: Mapping[str, Any], *,
                    settings: OperatorSettings, now: str) -> Outcome:
    metadata = broker["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    raw_spec = broker.get("spec") or {}
    paused, pause_source = pause_state(metadata, raw_spec)
    selector = names.label_selector_text(names.selector_labels(name))
    claims_path = object_path("v1", "PersistentVolumeClaim", namespace)
    live_sts = await api.get(object_path("apps/v1", "StatefulSet", namespace, name))
    claims: list[Mapping[str, Any]] = [
        *await api.list(claims_path, label_selector=selector)]
    observed: dict[str, Any] = {
        "generation": int(metadata.get("generation", 0)), "paused": paused,
        "pause_source": pause_source, "statefulset": live_sts, "claims": claims,
        "label_selector": selector}
    try:
        spec = parse_spec(raw_spec)
        check_store_settings(store_settings(spec))
        image = _image(spec, settings)
    except SpecError as error:
        observed["invalid_spec"] = str(error)
    else:
        observed["wanted_replicas"] = spec.replicas
        if paused:
            observed["growth"] = plan_growth(claims, size=spec.storage.size)
        else:
            applied = await apply_children(api, broker, spec, live_sts, image=image)
            growth, claims, problems = await grow_claims(api, claims_path, selector, claims,
                                                         size=spec.storage.size)
            observed.update(statefulset=applied.statefulset, claims=claims, growth=growth,
                            config_hash=applied.config_hash,
                            scale_down_refused=applied.scale_down_refused,
                            problems=[*applied.problems, *problems])
    observation = Observation(**observed)
    old_status = broker.get("status") or {}
    status = build_status(observation, old_status=old_status, now=now)
    event = newly_true(old_status.get("conditions") or [], desired_conditions(observation),
                       DEGRADED)
    degraded = any(c["type"] == DEGRADED and c["status"] == "True"
                   for c in status["conditions"])
    result = "paused" if paused else "degraded" if degraded else "ok"
    return Outcome(status, [event] if event is not None else [], result)


def _image(spec: BrokerSpec, settings: OperatorSettings) -> str:
    image = spec.image or settings.broker_image
    if not image:
        raise SpecError("spec.image is not set and the operator has no default "
                        "(MQSTORE_OPERATOR_BROKER_IMAGE)")
    return image


def children(broker: Mapping[str, Any], spec: BrokerSpec, live_sts: Mapping[str, Any] | None,
             *, image: str, replicas: int) -> tuple[list[dict[str, Any]], str]:
    """The manifests to apply, in order (the ConfigMap before the pods that mount it), and
    the config hash."""
    config_map = build_config_map(broker, spec)
    config_hash = config_map["metadata"]["annotations"][names.CONFIG_HASH_ANNOTATION]
    statefulset = build_statefulset(broker, spec, image=image, replicas=replicas,
                                    config_hash=config_hash)
    manifests = [config_map, build_headless_service(broker), build_client_service(broker),
                 build_disruption_budget(broker)]
    if spec.network.policies:  # before the pods, so that none starts unprotected
        manifests.append(build_broker_network_policy(broker, spec))
    manifests.append(keep_immutable_fields(statefulset, live_sts))
    if spec.notifier.replicas > 0:
        if spec.network.policies:
            manifests.append(build_notifier_network_policy(broker, spec))
        manifests += [build_notifier_deployment(broker, spec, image=image,
                                                config_hash=config_hash),
                      build_notifier_service(broker)]
    return manifests, config_hash


async def apply_children(api: KubeApi, broker: Mapping[str, Any], spec: BrokerSpec,
                         live_sts: Mapping[str, Any] | None, *, image: str) -> Applied:
    metadata = broker["metadata"]
    live = live_replicas(live_sts)
    allowed = names.annotation_true(metadata, names.ALLOW_SCALE_DOWN_ANNOTATION)
    replicas = decide_replicas(wanted=spec.replicas, live=live, scale_down_allowed=allowed)
    manifests, config_hash = children(broker, spec, live_sts, image=image, replicas=replicas)
    applied = Applied(statefulset=live_sts, config_hash=config_hash)
    applied.problems += await ensure_secrets(api, broker, spec)
    if replicas != spec.replicas:
        applied.scale_down_refused = (
            f"spec.replicas={spec.replicas} is below the {live} pods running; removing pods "
            f"drops the followers' copies, so it needs the annotation "
            f"{names.ALLOW_SCALE_DOWN_ANNOTATION}: \"true\" (their volumes are kept)")
    for manifest in manifests:
        try:
            answer = await api.apply(manifest)
        except ApiError as error:
            if error.retryable:
                raise
            applied.problems.append(f"{manifest['kind']} {manifest['metadata']['name']}: "
                                    f"{error.message}")
            continue
        if manifest["kind"] == "StatefulSet":
            applied.statefulset = answer
    namespace, name = metadata["namespace"], metadata["name"]
    if spec.notifier.replicas == 0:
        await _delete_notifiers(api, namespace, name)
    if not spec.network.policies:
        for policy in (name, names.notifier_name(name)):
            await api.delete(object_path(POLICY_API, "NetworkPolicy", namespace, policy))
    return applied


POLICY_API = "networking.k8s.io/v1"


async def _delete_notifiers(api: KubeApi, namespace: str, broker_name: str) -> None:
    name = names.notifier_name(broker_name)
    for api_version, kind in (("apps/v1", "Deployment"), ("v1", "Service"),
                              (POLICY_API, "NetworkPolicy")):
        await api.delete(object_path(api_version, kind, namespace, name))


async def ensure_secrets(api: KubeApi, broker: Mapping[str, Any],
                         spec: BrokerSpec) -> list[str]:
    """Create each generated Secret that does not exist yet (an existing one is never
    touched: its random secret is what the pods and clients already use), and report
    each Secret the pods could not mount.  The random values go straight into the
    manifest; nothing logs them."""
    metadata = broker["metadata"]
    namespace = metadata["namespace"]
    problems = []
    for use in secrets_in_use(metadata["name"], spec).all():
        path = object_path("v1", "Secret", namespace, use.name)
        live = await api.get(path)
        if live is None and use.generated:
            manifest = build_generated_secret(
                broker, use, random_text=secrets.token_urlsafe(RANDOM_BYTES))
            try:
                await api.create(manifest)
            except ApiError as error:
                if error.retryable:
                    raise
                problems.append(f"Secret {use.name}: {error.message}")
            continue
        problem = secret_problem(use, live, namespace=namespace)
        if problem is not None:
            problems.append(problem)
    return problems


async def grow_claims(api: KubeApi, claims_path: str, selector: str,
                      claims: Sequence[Mapping[str, Any]], *,
                      size: str) -> tuple[GrowthPlan, list[Mapping[str, Any]], list[str]]:
    """Patch every bound claim below `size`; returns the plan after the patches, the claims
    as they are now, and the refusals (e.g. a StorageClass without volume expansion)."""
    plan = plan_growth(claims, size=size)
    problems = []
    for claim_name, patch in plan.patches:
        try:
            await api.merge_patch(f"{claims_path}/{claim_name}", patch)
        except ApiError as error:
            if error.retryable:
                raise
            problems.append(f"claim {claim_name}: {error.message}")
    if not plan.patches:
        return plan, list(claims), problems
    fresh = await api.list(claims_path, label_selector=selector)
    return plan_growth(fresh, size=size), list(fresh), problems
