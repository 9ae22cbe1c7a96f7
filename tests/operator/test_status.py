"""Conditions follow the StatefulSet; lastTransitionTime moves only on a status change."""

from __future__ import annotations

from typing import Any

from mqstore.operator.conditions import Condition, merge_conditions, newly_true
from mqstore.operator.status import Observation, build_status
from mqstore.operator.volumes import GrowthPlan


def sts(*, wanted: int = 1, ready: int = 0, updated: int | None = None,
        revisions: tuple[str, str] = ("r1", "r1"), generation: int = 1,
        observed: int = 1) -> dict[str, Any]:
    return {"metadata": {"generation": generation}, "spec": {"replicas": wanted},
            "status": {"replicas": wanted, "readyReplicas": ready,
                       "updatedReplicas": wanted if updated is None else updated,
                       "currentRevision": revisions[0], "updateRevision": revisions[1],
                       "observedGeneration": observed}}


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def status_of(**observed: Any) -> dict[str, Any]:
    observation = Observation(**{"generation": 3, "paused": False, "statefulset": None,
                                 **observed})
    return build_status(observation, old_status={}, now="2030-01-01T00:00:00Z")


def test_no_statefulset_yet() -> None:
    status = status_of(config_hash="h")
    assert conditions(status) == {"Ready": ("False", "StatefulSetMissing"),
                                  "Progressing": ("True", "Creating"),
                                  "Degraded": ("False", "AsExpected"),
                                  "ReconciliationPaused": ("False", "Reconciling")}
    assert status["observedGeneration"] == 3
    assert status["configHash"] == "h"
    assert "replicas" not in status


def test_ready_when_every_pod_is() -> None:
    status = status_of(statefulset=sts(wanted=2, ready=2))
    assert conditions(status)["Ready"] == ("True", "AllReplicasReady")
    assert conditions(status)["Progressing"] == ("False", "Stable")
    assert (status["replicas"], status["readyReplicas"]) == (2, 2)


def test_rolling_update_and_scaling_are_progress() -> None:
    rolling = status_of(statefulset=sts(wanted=2, ready=2, revisions=("r1", "r2")))
    assert conditions(rolling)["Progressing"] == ("True", "RollingUpdate")
    unobserved = status_of(statefulset=sts(generation=2, observed=1, ready=1))
    assert conditions(unobserved)["Progressing"] == ("True", "RollingUpdate")
    scaling = status_of(statefulset=sts(wanted=3, ready=1))
    assert conditions(scaling)["Progressing"] == ("True", "Scaling")
    assert conditions(scaling)["Ready"] == ("False", "ReplicasNotReady")


def test_volume_growth_is_progress() -> None:
    resizing = status_of(statefulset=sts(ready=1), growth=GrowthPlan([], [], ["data-b-0"]))
    assert conditions(resizing)["Progressing"] == ("True", "VolumesResizing")
    waiting = status_of(statefulset=sts(ready=1), growth=GrowthPlan([], ["data-b-0"], []))
    assert conditions(waiting)["Progressing"] == ("True", "VolumesWaitingToGrow")


def test_degraded_reasons() -> None:
    assert conditions(status_of(invalid_spec="bad"))["Degraded"] == ("True", "InvalidSpec")
    assert conditions(status_of(scale_down_refused="no"))["Degraded"] == \
        ("True", "ScaleDownRefused")
    assert conditions(status_of(problems=["claim x: forbidden"]))["Degraded"] == \
        ("True", "ChangeRefused")


def test_paused_keeps_what_was_last_reconciled() -> None:
    old = {"observedGeneration": 2, "configHash": "old"}
    observation = Observation(generation=3, paused=True, pause_source="spec.paused",
                              statefulset=sts(ready=1), config_hash="new")
    status = build_status(observation, old_status=old, now="2030-01-01T00:00:00Z")
    assert conditions(status)["ReconciliationPaused"] == ("True", "Paused")
    assert (status["observedGeneration"], status["configHash"]) == (2, "old")


def test_transition_time_moves_only_when_the_status_does() -> None:
    first = merge_conditions([], [Condition("Ready", False, "A")], now="t1", generation=1)
    same = merge_conditions(first, [Condition("Ready", False, "B", "msg")], now="t2",
                            generation=2)
    assert same[0]["lastTransitionTime"] == "t1"
    assert (same[0]["reason"], same[0]["observedGeneration"]) == ("B", 2)
    flipped = merge_conditions(same, [Condition("Ready", True, "C")], now="t3", generation=2)
    assert flipped[0]["lastTransitionTime"] == "t3"


def test_an_event_only_when_degraded_starts_or_changes_reason() -> None:
    degraded = [Condition("Degraded", True, "ScaleDownRefused", "m")]
    assert newly_true([], degraded, "Degraded") == degraded[0]
    stored = merge_conditions([], degraded, now="t", generation=1)
    assert newly_true(stored, degraded, "Degraded") is None
    other = [Condition("Degraded", True, "InvalidSpec", "m")]
    assert newly_true(stored, other, "Degraded") == other[0]
    assert newly_true(stored, [Condition("Degraded", False, "AsExpected")], "Degraded") is None
