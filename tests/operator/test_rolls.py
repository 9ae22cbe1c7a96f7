"""A cluster's groups roll one at a time (operator/rolls.py): the target group's StatefulSet
has partition 0, every other holds at its replica count; the target moves to the next group
only once the one before is settled; one group carries no partition."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mqstore.operator.kube import object_path
from mqstore.operator.reconcile import reconcile
from mqstore.operator.rolls import is_settled, partition, roll_target
from mqstore.operator.settings import OperatorSettings

from .broker_fixtures import broker
from .fake_api import FakeApi

SETTINGS = OperatorSettings(broker_image="registry.example/mqstore:1")
CLUSTER = {"storage": {"size": "10Gi"}, "replicas": 2, "groups": 3,
           "nameServer": {"replicas": 1}}
GROUPS = ("demo", "demo-g1", "demo-g2")


def live(*, settled: bool, replicas: int = 2, ready: int | None = None) -> dict[str, Any]:
    """A live StatefulSet's metadata, spec and status as the controller reports them."""
    return {"metadata": {"generation": 3}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": 3, "currentRevision": "r1",
                       "updateRevision": "r1" if settled else "r2",
                       "updatedReplicas": replicas if settled else 0,
                       "readyReplicas": replicas if ready is None else ready}}


def test_settled_needs_the_latest_generation_one_revision_and_every_pod_ready() -> None:
    assert is_settled(live(settled=True))
    assert not is_settled(live(settled=False))
    assert not is_settled(live(settled=True, ready=1))
    stale = live(settled=True)
    stale["status"]["observedGeneration"] = 2
    assert not is_settled(stale)
    assert not is_settled({"metadata": {"generation": 1}, "spec": {"replicas": 1}})


@pytest.mark.parametrize(("settled", "target"), [
    ((True, True, True), 0), ((False, False, True), 0), ((True, False, False), 1),
    ((True, True, False), 2)])
def test_the_target_is_the_lowest_unsettled_group(settled: tuple[bool, ...],
                                                  target: int) -> None:
    assert roll_target([live(settled=s) for s in settled]) == target


def test_a_group_not_yet_created_does_not_hold_the_others() -> None:
    assert roll_target([live(settled=True), None, live(settled=False)]) == 2


def test_partitions_hold_every_group_but_the_target() -> None:
    assert [partition(i, target=1, replicas=3) for i in range(3)] == [3, 0, 3]


def _partitions(api: FakeApi) -> list[int | None]:
    found = []
    for group in GROUPS:
        sts = api.objects[object_path("apps/v1", "StatefulSet", "ns1", group)]
        found.append(sts["spec"]["updateStrategy"].get("rollingUpdate", {}).get("partition"))
    return found


def _set_status(api: FakeApi, group: str, *, settled: bool) -> None:
    path = object_path("apps/v1", "StatefulSet", "ns1", group)
    api.objects[path] = {**api.objects[path], **live(settled=settled)} | {
        "metadata": {**api.objects[path]["metadata"], "generation": 3}}


def test_a_change_rolls_group_0_then_each_next_group_once_the_one_before_settles() -> None:
    api = FakeApi()
    body = broker(spec=CLUSTER)

    def run() -> None:
        asyncio.run(reconcile(api, body, settings=SETTINGS,  # type: ignore[arg-type]
                              now="2030-01-01T00:00:00Z"))

    run()
    assert _partitions(api) == [0, 2, 2], "new groups: group 0 is the target"
    for group in GROUPS:
        _set_status(api, group, settled=True)
    run()
    assert _partitions(api) == [0, 2, 2]
    # A change reaches every template; group 0 rolls, the others hold.
    for group in GROUPS:
        _set_status(api, group, settled=False)
    run()
    assert _partitions(api) == [0, 2, 2]
    _set_status(api, "demo", settled=True)
    run()
    assert _partitions(api) == [2, 0, 2]
    _set_status(api, "demo-g1", settled=True)
    run()
    assert _partitions(api) == [2, 2, 0]
    _set_status(api, "demo-g2", settled=True)
    run()
    assert _partitions(api) == [0, 2, 2]


def test_one_group_has_no_partition() -> None:
    api = FakeApi()
    asyncio.run(reconcile(api, broker(spec={"storage": {"size": "10Gi"}, "replicas": 2}),
                          settings=SETTINGS, now="2030-01-01T00:00:00Z"))  # type: ignore[arg-type]
    sts = api.objects[object_path("apps/v1", "StatefulSet", "ns1", "demo")]
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
