"""One broker group rolls at a time.

Within a group the StatefulSet's RollingUpdate already replaces the highest ordinal first,
each pod once the one before is Ready, so the followers go first and the master, pod 0,
last, only once its new followers are Ready (a follower's writer is Ready only when caught
up).  Across groups nothing orders them: a config or image change reaches every group's
StatefulSet in the same pass, and each would roll at once, so two masters could be down
together and a producer's retry would find no group to send to.

So in a cluster each StatefulSet carries `updateStrategy.rollingUpdate.partition`: 0 (roll
freely) for the target group, its replica count (hold: no pod is replaced) for every other.
The target is the lowest group that is not settled, or group 0 when all are: a change
starts in group 0, and each pass after that moves the target to the next group only once
the one before has every pod updated and Ready.  A held group's template is applied all the
same, so its StatefulSet knows the revision it will roll to and is not settled until it has.

Settled: the controller has seen the latest spec (`observedGeneration`), every pod runs the
update revision (`currentRevision == updateRevision`, `updatedReplicas == replicas`) and is
Ready, and, with followers, the master counts every one of them in sync (its writer's
`followers_in_sync`, GET /v1/replication: less than `replication_lag_bytes_max` behind).
Ready pods are not enough: a follower's pod still shows Ready for up to two probe periods
(10 s) after it lost its master, and a restarted master answers SLAVE_NOT_AVAILABLE until
its followers have reconnected; rolling the next group meanwhile left a sync producer no
group that acknowledged (seen in CI: 4.3 s of SLAVE_NOT_AVAILABLE from both groups).  The
master's own count is asked instead (operator/roll_replication.py).

A group that stays unsettled (a pod that never becomes Ready, a follower that never catches
up) holds the later groups' rolls until it recovers; its own changes still go through,
since it is the target.  The operator's passes (each resync,
`operator.resyncIntervalSeconds`, 30 s by default) move the target, so a roll of N groups
takes up to N passes beyond the pods' own time.  A Broker of one group carries no
partition: its StatefulSet rolls as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def is_settled(live: Mapping[str, Any]) -> bool:
    """Whether a live StatefulSet has nothing left to roll and every pod Ready."""
    status = live.get("status") or {}
    replicas = int(live.get("spec", {}).get("replicas", 1))
    return bool(
        int(status.get("observedGeneration") or 0) >= int(
            live.get("metadata", {}).get("generation") or 0)
        and status.get("updateRevision") == status.get("currentRevision")
        and int(status.get("updatedReplicas") or 0) == replicas
        and int(status.get("readyReplicas") or 0) == replicas)


def caught_up(replication: Mapping[str, Any], *, replicas: int) -> bool:
    """Whether a master's GET /v1/replication counts all its `replicas - 1` followers in
    sync."""
    assert replicas >= 1
    return int(replication.get("followers_in_sync") or 0) >= replicas - 1


def roll_target(live_sets: Sequence[Mapping[str, Any] | None],
                replicated: Sequence[bool] = ()) -> int:
    """The group that may roll now: the lowest one not settled, else 0.  A group not yet
    created (None) is settled: its pods start at the only revision there is.  `replicated`:
    per group, whether its master counts every follower in sync (missing: True)."""
    for index, live in enumerate(live_sets):
        if live is None:
            continue
        if not is_settled(live) or (index < len(replicated) and not replicated[index]):
            return index
    return 0


def partition(index: int, *, target: int, replicas: int) -> int:
    """`rollingUpdate.partition` of group `index`: 0 for the target, else `replicas` (pods
    with an ordinal below the partition keep their revision)."""
    assert replicas >= 1 and target >= 0
    return 0 if index == target else replicas
