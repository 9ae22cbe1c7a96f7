"""The Broker's status, derived from what exists: the StatefulSet's own status, the
claims, and what the reconcile pass decided (refused scale-down, refused patches)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .conditions import DEGRADED, PAUSED, PROGRESSING, READY, Condition, merge_conditions
from .volumes import GrowthPlan, current_storage


@dataclasses.dataclass(frozen=True, kw_only=True)
class Observation:
    generation: int
    paused: bool
    pause_source: str = ""
    statefulset: Mapping[str, Any] | None
    claims: Sequence[Mapping[str, Any]] = ()
    wanted_replicas: int | None = None
    """spec.replicas (None when the spec could not be parsed)."""
    scale_down_refused: str = ""
    invalid_spec: str = ""
    problems: Sequence[str] = ()
    """Refusals by the API server during this pass (apply, claim resize)."""
    growth: GrowthPlan | None = None
    config_hash: str | None = None
    label_selector: str = ""


def _sts_status(sts: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(wanted, ready, updated, current pods) of a StatefulSet."""
    status = sts.get("status") or {}
    wanted = int(sts.get("spec", {}).get("replicas", 1))
    return (wanted, int(status.get("readyReplicas", 0)), int(status.get("updatedReplicas", 0)),
            int(status.get("replicas", 0)))


def ready_condition(sts: Mapping[str, Any] | None) -> Condition:
    if sts is None:
        return Condition(READY, False, "StatefulSetMissing", "the StatefulSet does not exist yet")
    wanted, ready, _, _ = _sts_status(sts)
    if ready >= wanted:
        return Condition(READY, True, "AllReplicasReady", f"{ready}/{wanted} pods ready")
    return Condition(READY, False, "ReplicasNotReady", f"{ready}/{wanted} pods ready")


def progressing_condition(obs: Observation) -> Condition:
    sts = obs.statefulset
    if sts is None:
        return Condition(PROGRESSING, True, "Creating", "creating the StatefulSet")
    wanted, ready, updated, current = _sts_status(sts)
    status = sts.get("status") or {}
    generation = sts.get("metadata", {}).get("generation", 0)
    if status.get("observedGeneration", 0) < generation or updated < wanted or (
            status.get("updateRevision") != status.get("currentRevision")):
        return Condition(PROGRESSING, True, "RollingUpdate",
                         f"{updated}/{wanted} pods on the current pod template")
    if current != wanted or ready < wanted:
        return Condition(PROGRESSING, True, "Scaling", f"{current} pods, {ready} ready, "
                                                       f"{wanted} wanted")
    growth = obs.growth
    if growth is not None and growth.resizing:
        return Condition(PROGRESSING, True, "VolumesResizing",
                         f"expanding {', '.join(growth.resizing)}")
    if growth is not None and growth.waiting:
        return Condition(PROGRESSING, True, "VolumesWaitingToGrow",
                         f"not bound yet, so not expandable: {', '.join(growth.waiting)}")
    return Condition(PROGRESSING, False, "Stable", "nothing to roll, scale or resize")


def degraded_condition(obs: Observation) -> Condition:
    if obs.invalid_spec:
        return Condition(DEGRADED, True, "InvalidSpec", obs.invalid_spec)
    if obs.scale_down_refused:
        return Condition(DEGRADED, True, "ScaleDownRefused", obs.scale_down_refused)
    if obs.problems:
        return Condition(DEGRADED, True, "ChangeRefused", "; ".join(obs.problems))
    return Condition(DEGRADED, False, "AsExpected", "")


def paused_condition(obs: Observation) -> Condition:
    if obs.paused:
        return Condition(PAUSED, True, "Paused", f"{obs.pause_source}: children are left "
                                                 f"as they are")
    return Condition(PAUSED, False, "Reconciling", "")


def desired_conditions(obs: Observation) -> list[Condition]:
    return [ready_condition(obs.statefulset), progressing_condition(obs),
            degraded_condition(obs), paused_condition(obs)]


def build_status(obs: Observation, *, old_status: Mapping[str, Any],
                 now: str) -> dict[str, Any]:
    """The whole `.status` to merge-patch.  While paused, observedGeneration and configHash
    keep what was last reconciled: the operator has not acted on the newer spec."""
    conditions = desired_conditions(obs)
    status: dict[str, Any] = {
        "conditions": merge_conditions(old_status.get("conditions") or [], conditions,
                                       now=now, generation=obs.generation),
        "labelSelector": obs.label_selector,
    }
    if obs.paused:
        for key in ("observedGeneration", "configHash"):
            if key in old_status:
                status[key] = old_status[key]
    else:
        status["observedGeneration"] = obs.generation
        if obs.config_hash is not None:
            status["configHash"] = obs.config_hash
    if obs.statefulset is not None:
        _, ready, _, current = _sts_status(obs.statefulset)
        status["replicas"] = current
        status["readyReplicas"] = ready
    storage = current_storage(obs.claims)
    if storage is not None:
        status["currentStorage"] = storage
    return status
