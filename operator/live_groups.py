"""A Broker's groups as they run: their StatefulSets, read in group order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import names
from .groups import GROUPS_MAX
from .kube import KubeApi, object_path


async def read_groups(api: KubeApi, namespace: str, broker_name: str, *, uid: str,
                      wanted: int) -> tuple[list[Mapping[str, Any] | None], list[str]]:
    """The StatefulSets of groups 0..wanted-1 (None: missing), then of every group past
    them that exists (groups are only added at the end, so the first missing one ends the
    search): a lowered spec.groups still sees its live groups.  Also the names of those
    whose owner is not this Broker (a Broker named like one of its groups): reported,
    never applied over, and not counted."""
    found: list[Mapping[str, Any] | None] = []
    foreign: list[str] = []
    for index in range(GROUPS_MAX):
        group = names.group_name(broker_name, index)
        live = await api.get(object_path("apps/v1", "StatefulSet", namespace, group))
        if index > 0 and live is not None and not names.owned_by(live, uid):
            if index < wanted:
                foreign.append(group)
            live = None
        if live is None and index >= wanted:
            break
        found.append(live)
    return found, foreign


def live_group_count(live_sets: Sequence[Mapping[str, Any] | None]) -> int:
    return max((index + 1 for index, live in enumerate(live_sets) if live is not None),
               default=0)
