"""The Broker's status, derived from what exists: each group's StatefulSet status, the
name servers' Deployment, the claims, and what the reconcile pass decided (refused
scale-down, a group draining, refused patches).

In a cluster (operator/groups.py) `replicas` and `readyReplicas` are the fewest among the
groups (so Ready-Replicas equal to Replicas means every group is full), `groups` has one
entry per group and `readyGroups` counts the groups whose pods are all ready; Ready is
true only when every group and the name servers are."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .conditions import DEGRADED, PAUSED, PROGRESSING, READY, Condition, merge_conditions
from .volumes import GrowthPlan, current_storage


@dataclasses.dataclass(frozen=True, kw_only=True)
class GroupObservation:
    name: str
    statefulset: Mapping[str, Any] | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Observation:
    generation: int
    paused: bool
    pause_source: str = ""
    statefulset: Mapping[str, Any] | None
    """Group 0's StatefulSet (a one-group Broker's only one)."""
    groups: Sequence[GroupObservation] = ()
    """Every group, group 0 first (its `statefulset` is the one above); empty: group 0
    only, unnamed, and no `status.groups`."""
    name_servers: Mapping[str, Any] | None = None
    """The name servers' Deployment, as it is."""
    name_servers_wanted: int = 0
    """spec.nameServer.replicas (0: no name servers)."""
    draining: Mapping[str, Any] | None = None
    """`status.draining` (operator/drain.py): {group, lag, since}; None: no group drains."""
    drain_message: str = ""
    """Why a group is still draining (the Progressing condition's message)."""
    roll_waiting: str = ""
    """Why a roll waits before its next group (operator/roll_replication.py): the last
    group's master has not every follower in sync yet."""
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
    external_name_server: str = ""
    """`<host>:<nodePortBase>` with network.external, or the entry load balancer's address
    (operator/external.py), else ""."""
    waiting_load_balancers: Sequence[str] = ()
    """LoadBalancer Services with no address yet: their groups wait to be configured."""


def _sts_status(sts: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(wanted, ready, updated, current pods) of a StatefulSet."""
    status = sts.get("status") or {}
    wanted = int(sts.get("spec", {}).get("replicas", 1))
    return (wanted, int(status.get("readyReplicas", 0)), int(status.get("updatedReplicas", 0)),
            int(status.get("replicas", 0)))


def all_groups(obs: Observation) -> Sequence[GroupObservation]:
    return obs.groups or (GroupObservation(name="", statefulset=obs.statefulset),)


def _prefix(obs: Observation, group: GroupObservation) -> str:
    """Names the group in a message, once there is more than one."""
    return f"group {group.name}: " if len(all_groups(obs)) > 1 else ""


def group_ready(sts: Mapping[str, Any] | None) -> bool:
    if sts is None:
        return False
    wanted, ready, _, _ = _sts_status(sts)
    return ready >= wanted


def _deployment_counts(deployment: Mapping[str, Any] | None) -> tuple[int, int]:
    """(pods, ready pods) of a Deployment."""
    status = (deployment or {}).get("status") or {}
    return int(status.get("replicas", 0)), int(status.get("readyReplicas", 0))


def ready_condition(obs: Observation) -> Condition:
    ready_messages = []
    for group in all_groups(obs):
        prefix, sts = _prefix(obs, group), group.statefulset
        if sts is None:
            return Condition(READY, False, "StatefulSetMissing",
                             f"{prefix}the StatefulSet does not exist yet")
        wanted, ready, _, _ = _sts_status(sts)
        if ready < wanted:
            return Condition(READY, False, "ReplicasNotReady",
                             f"{prefix}{ready}/{wanted} pods ready")
        ready_messages.append(f"{prefix}{ready}/{wanted} pods ready")
    if obs.name_servers_wanted > 0:
        _, ready = _deployment_counts(obs.name_servers)
        if ready < obs.name_servers_wanted:
            return Condition(READY, False, "NameServersNotReady",
                             f"{ready}/{obs.name_servers_wanted} name servers ready")
    return Condition(READY, True, "AllReplicasReady", "; ".join(ready_messages))


def progressing_condition(obs: Observation) -> Condition:
    if obs.drain_message:
        return Condition(PROGRESSING, True, "Draining", obs.drain_message)
    if obs.roll_waiting:
        return Condition(PROGRESSING, True, "WaitingForReplication", obs.roll_waiting)
    if obs.waiting_load_balancers:
        return Condition(PROGRESSING, True, "WaitingForLoadBalancers", (
            f"no address from the load balancer controller yet for "
            f"{', '.join(obs.waiting_load_balancers)}; the groups behind them are configured "
            f"and started once every one of their Services has one"))
    for group in all_groups(obs):
        condition = _group_progress(group.statefulset, prefix=_prefix(obs, group))
        if condition is not None:
            return condition
    growth = obs.growth
    if growth is not None and growth.resizing:
        return Condition(PROGRESSING, True, "VolumesResizing",
                         f"expanding {', '.join(growth.resizing)}")
    if growth is not None and growth.waiting:
        return Condition(PROGRESSING, True, "VolumesWaitingToGrow",
                         f"not bound yet, so not expandable: {', '.join(growth.waiting)}")
    return Condition(PROGRESSING, False, "Stable", "nothing to roll, scale or resize")


def _group_progress(sts: Mapping[str, Any] | None, *, prefix: str) -> Condition | None:
    """A group's rollout or scaling, or None when it is stable."""
    if sts is None:
        return Condition(PROGRESSING, True, "Creating", f"{prefix}creating the StatefulSet")
    wanted, ready, updated, current = _sts_status(sts)
    status = sts.get("status") or {}
    generation = sts.get("metadata", {}).get("generation", 0)
    if status.get("observedGeneration", 0) < generation or updated < wanted or (
            status.get("updateRevision") != status.get("currentRevision")):
        return Condition(PROGRESSING, True, "RollingUpdate",
                         f"{prefix}{updated}/{wanted} pods on the current pod template")
    if current != wanted or ready < wanted:
        return Condition(PROGRESSING, True, "Scaling", f"{prefix}{current} pods, {ready} "
                                                       f"ready, {wanted} wanted")
    return None


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
    return [ready_condition(obs), progressing_condition(obs),
            degraded_condition(obs), paused_condition(obs)]


def build_status(obs: Observation, *, old_status: Mapping[str, Any],
                 now: str) -> dict[str, Any]:
    """The whole `.status` to merge-patch.  While paused, observedGeneration, configHash and
    external keep what was last reconciled: the operator has not acted on the newer spec."""
    conditions = desired_conditions(obs)
    status: dict[str, Any] = {
        "conditions": merge_conditions(old_status.get("conditions") or [], conditions,
                                       now=now, generation=obs.generation),
        "labelSelector": obs.label_selector,
    }
    if obs.paused:
        for key in ("observedGeneration", "configHash", "external", "draining"):
            if key in old_status:
                status[key] = old_status[key]
    else:
        status["observedGeneration"] = obs.generation
        if obs.config_hash is not None:
            status["configHash"] = obs.config_hash
        if obs.external_name_server:
            status["external"] = {"nameServer": obs.external_name_server}
        elif "external" in old_status and obs.config_hash is not None:
            status["external"] = None  # switched off and applied: the merge patch deletes it
        if obs.draining is not None:
            status["draining"] = dict(obs.draining)
        elif old_status.get("draining") and obs.config_hash is not None:
            status["draining"] = None
    status.update(_replica_counts(obs))
    storage = current_storage(obs.claims)
    if storage is not None:
        status["currentStorage"] = storage
    return status


def _replica_counts(obs: Observation) -> dict[str, Any]:
    """replicas and readyReplicas (the fewest among the groups), then per group, then the
    name servers."""
    counted = [_sts_status(group.statefulset) for group in all_groups(obs)
               if group.statefulset is not None]
    counts: dict[str, Any] = {}
    if counted:
        counts["replicas"] = min(current for _, _, _, current in counted)
        counts["readyReplicas"] = min(ready for _, ready, _, _ in counted)
    if obs.groups:
        counts["groups"] = [_group_entry(group) for group in obs.groups]
        counts["readyGroups"] = sum(group_ready(group.statefulset) for group in obs.groups)
    if obs.name_servers_wanted > 0:
        current, ready = _deployment_counts(obs.name_servers)
        counts["nameServers"] = {"replicas": current, "readyReplicas": ready}
    return counts


def _group_entry(group: GroupObservation) -> dict[str, Any]:
    current, ready = 0, 0
    if group.statefulset is not None:
        _, ready, _, current = _sts_status(group.statefulset)
    return {"name": group.name, "replicas": current, "readyReplicas": ready,
            "master": f"{group.name}-0"}
