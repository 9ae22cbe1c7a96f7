"""Removing a broker group from a cluster without losing a message: the drain.

When `spec.groups` is below the groups running, the highest running group is drained, one
group at a time, over the passes of the reconcile loop (every resync, 30 s by default):

1. PUT /v1/broker/permission {"permission": 4} on the group's master notifier: its routes
   say read only, producers send to the other groups.
2. Every pass, the lag on this group of every consumer group of GET /v1/groups, on this
   group's notifier and every other group's, on every topic it committed on
   (services/admin/lag.py), summed.  While it is above 0: condition
   Progressing `Draining` and `status.draining` {group, lag, since}; nothing is deleted.
3. At lag 0, or at once with the annotation `mqstore.io/force-scale-in: "true"`: the
   group's StatefulSet, ConfigMap, Services, PDB, NetworkPolicy (and extra notifiers) are
   deleted; its claims are kept.

A notifier that cannot be reached (refused, timed out, an error answer) is said in the
condition and tried again next pass: nothing is deleted without a lag of 0 unless forced.
Raising `spec.groups` back over a draining group sets its permission to 6: it serves sends
again, with all its data.

Its pods then stop as any pod does (SIGTERM: the writer flushes, the notifier unregisters
from the name servers), so the name servers stop routing to the group.  Forcing skips only
the wait: the claims stay, but messages nobody consumed are no longer served until a group
of that index is added again (it takes the same claims back).

`next_step` and `may_delete` are the decisions, pure; `drain_groups` does the calls."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from . import names
from .group_client import GroupClient, GroupUnreachable, notifier_url
from .kube import KubeApi, object_path
from .network import notifier_object_names
from .spec import GROUPS_MAX, BrokerSpec

FORCE_SCALE_IN_ANNOTATION = f"{names.GROUP}/force-scale-in"
PERMISSION_READ_ONLY = 4
PERMISSION_READ_WRITE = 6
"""RocketMQ's broker permissions (PermName): 4 read, 2 write, 6 both."""



Action = Literal["none", "drain", "undrain"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step:
    action: Action
    group_index: int = -1


def next_step(*, live_groups: int, wanted_groups: int, draining_index: int | None) -> Step:
    """Drain the highest running group while more run than wanted; give a draining group
    its writes back once it is wanted again."""
    assert 1 <= wanted_groups <= GROUPS_MAX
    if wanted_groups < live_groups:
        return Step(action="drain", group_index=live_groups - 1)
    if draining_index is not None and draining_index < live_groups:
        return Step(action="undrain", group_index=draining_index)
    return Step(action="none")


def may_delete(*, lag: int | None, forced: bool) -> bool:
    """Only a lag of 0 (None: not measured) lets a group go, unless forced."""
    return forced or lag == 0


def group_objects(group: str) -> list[tuple[str, str, str]]:
    """(apiVersion, kind, name) of what a removed group leaves behind, the pods' owner
    first; never its claims.  Its external Services are pruned by the apply that
    follows (reconcile.prune_external_services)."""
    return [("apps/v1", "StatefulSet", group), ("v1", "ConfigMap", names.config_map_name(group)),
            ("v1", "Service", names.headless_service_name(group)), ("v1", "Service", group),
            ("policy/v1", "PodDisruptionBudget", group),
            ("networking.k8s.io/v1", "NetworkPolicy", group), *notifier_object_names(group)]


def draining_index(broker_name: str, draining: Mapping[str, Any] | None) -> int | None:
    """The index of the group `status.draining` names (None: none, or not a group)."""
    if not draining:
        return None
    for index in range(1, GROUPS_MAX):
        if names.group_name(broker_name, index) == draining.get("group"):
            return index
    return None


def draining_status(group: str, *, lag: int | None, old: Mapping[str, Any] | None,
                    now: str) -> dict[str, Any]:
    """`status.draining`; `since` stays while the same group drains."""
    since = old["since"] if old and old.get("group") == group and old.get("since") else now
    return {"group": group, "lag": lag, "since": since}


def drain_message(group: str, *, lag: int | None, problem: str) -> str:
    if lag is None:
        return (f"draining group {group}: its notifier could not be reached ({problem}); "
                f"retrying next pass, nothing is deleted until its consumers' lag is 0 (or "
                f"the annotation {FORCE_SCALE_IN_ANNOTATION}: \"true\")")
    return (f"draining group {group}: read only, {lag} messages not consumed yet; it is "
            f"deleted (its claims kept) once every consumer group has read it to the end, "
            f"or at once with the annotation {FORCE_SCALE_IN_ANNOTATION}: \"true\"")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Drained:
    live_groups: int
    """The groups running after this pass's deletions."""
    draining: dict[str, Any] | None
    message: str
    """The Progressing condition's message while draining ("" otherwise)."""


async def drain_groups(api: KubeApi, broker: Mapping[str, Any], spec: BrokerSpec, *,
                       live_groups: int, client: GroupClient, scheme: str,
                       now: str) -> Drained:
    """One pass of the drain (the table above), highest group first; a group deleted with
    lag 0 lets the next one start in the same pass."""
    metadata = broker["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    old = (broker.get("status") or {}).get("draining")
    forced = names.annotation_true(metadata, FORCE_SCALE_IN_ANNOTATION)
    for _ in range(GROUPS_MAX):
        step = next_step(live_groups=live_groups, wanted_groups=spec.groups,
                         draining_index=draining_index(name, old))
        if step.action == "none":
            return Drained(live_groups=live_groups, draining=None, message="")
        group = names.group_name(name, step.group_index)
        url = notifier_url(group, namespace, scheme=scheme)
        if step.action == "undrain":
            return await _undrain(client, url, group, old=old, live_groups=live_groups)
        peers = [notifier_url(names.group_name(name, index), namespace, scheme=scheme)
                 for index in range(step.group_index)]
        lag, problem = await _measure(client, url, peers)
        if not may_delete(lag=lag, forced=forced):
            return Drained(live_groups=live_groups, message=drain_message(
                group, lag=lag, problem=problem), draining=draining_status(
                group, lag=lag, old=old, now=now))
        for api_version, kind, object_name in group_objects(group):
            await api.delete(object_path(api_version, kind, namespace, object_name))
        live_groups, old = live_groups - 1, None
    raise AssertionError("at most GROUPS_MAX groups are drained in one pass")


async def _measure(client: GroupClient, url: str,
                   peers: Sequence[str]) -> tuple[int | None, str]:
    """Read only first (again every pass: a restarted notifier keeps it in its file), then
    the lag; (None, why) when the notifier cannot be reached."""
    try:
        await client.set_permission(url, permission=PERMISSION_READ_ONLY)
        return await client.lag(url, peers=peers), ""
    except GroupUnreachable as error:
        return None, str(error)


async def _undrain(client: GroupClient, url: str, group: str, *,
                   old: Mapping[str, Any] | None, live_groups: int) -> Drained:
    """Writes back on a group wanted again; `status.draining` stays until that worked."""
    try:
        await client.set_permission(url, permission=PERMISSION_READ_WRITE)
    except GroupUnreachable as error:
        return Drained(live_groups=live_groups, draining=dict(old or {}), message=(
            f"group {group} is wanted again but is still read only: its notifier could not "
            f"be reached ({error}); retrying next pass"))
    return Drained(live_groups=live_groups, draining=None, message="")
