"""The roll's one question to the pods (operator/rolls.py): has each settled group's master
every follower in sync again?

Asked group by group from group 0, of each group whose StatefulSet is settled and has
followers, and only up to the first group that is not settled or not caught up: that one is
the roll's target whatever the later groups say.  A master that cannot be reached counts as
not caught up (the roll waits, the next pass asks again)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .group_client import GroupClient, GroupUnreachable, writer_url
from .rolls import caught_up, is_settled


@dataclasses.dataclass(frozen=True, kw_only=True)
class Replicated:
    groups: list[bool] = dataclasses.field(default_factory=list)
    """Per group: False for the first settled group whose master has not every follower in
    sync, True for the others (asked or not)."""
    waiting: str = ""
    """Why that group holds the roll ("" when none does)."""


async def replicated_groups(client: GroupClient, group_names: Sequence[str],
                            live_sets: Sequence[Mapping[str, Any] | None], *,
                            namespace: str, scheme: str) -> Replicated:
    groups = [True] * len(live_sets)
    for index, (group, live) in enumerate(zip(group_names, live_sets, strict=True)):
        if live is None:
            continue
        if not is_settled(live):
            break
        replicas = int(live.get("spec", {}).get("replicas", 1))
        if replicas == 1:
            continue
        try:
            answer = await client.replication(writer_url(group, namespace, scheme=scheme))
        except GroupUnreachable as error:
            groups[index] = False
            return Replicated(groups=groups, waiting=(
                f"group {group}'s master could not be asked for its followers ({error})"))
        if not caught_up(answer, replicas=replicas):
            groups[index] = False
            return Replicated(groups=groups, waiting=(
                f"group {group}'s master has {answer.get('followers_in_sync', 0)} of "
                f"{replicas - 1} followers in sync"))
    return Replicated(groups=groups)


def roll_waiting(replicated: Replicated,
                 live_sets: Sequence[Mapping[str, Any] | None]) -> str:
    """The Progressing message while a later group's roll waits for an earlier group's
    followers ("" when none waits)."""
    if False not in replicated.groups:
        return ""
    held = replicated.groups.index(False)
    pending = [str((live or {}).get("metadata", {}).get("name")) for live in live_sets[held + 1:]
               if live is not None and not is_settled(live)]
    if not pending:
        return ""
    return (f"rolling group by group: {replicated.waiting}; {', '.join(pending)} "
            f"rolls once they have caught up")
