"""A cluster's groups roll one at a time (operator/rolls.py): the target group's StatefulSet
has partition 0, every other holds at its replica count; the target moves to the next group
only once the one before is settled and its master counts every follower in sync again
(operator/roll_replication.py); one group carries no partition."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from mqstore.operator.group_client import GroupClient, GroupUnreachable
from mqstore.operator.kube import object_path
from mqstore.operator.reconcile import Outcome, reconcile
from mqstore.operator.rolls import caught_up, is_settled, partition, roll_target
from mqstore.operator.settings import OperatorSettings
from mqstore.operator.spec import BrokerSpec

from .broker_fixtures import broker
from .fake_api import FakeApi

SETTINGS = OperatorSettings(broker_image="registry.example/mqstore:1")
CLUSTER = {"storage": {"size": "10Gi"}, "replicas": 2, "groups": 3,
           "nameServer": {"replicas": 1}}
GROUPS = ("demo", "demo-g1", "demo-g2")


class FakeMasters:
    """Each group's master writer: how many followers it counts in sync, or unreachable."""

    def __init__(self, *, in_sync: int = 1) -> None:
        self.in_sync = dict.fromkeys(GROUPS, in_sync)
        self.unreachable: set[str] = set()
        self.asked: list[str] = []

    async def replication(self, url: str) -> Mapping[str, Any]:
        assert url.endswith(":8081"), url
        group = url.split("://")[1].split(".", maxsplit=1)[0].removesuffix("-0")
        self.asked.append(group)
        if group in self.unreachable:
            raise GroupUnreachable(f"GET {url}/v1/replication: connection refused")
        return {"role": "sync_master", "followers_in_sync": self.in_sync[group]}

    async def set_permission(self, url: str, *, permission: int) -> None:
        raise AssertionError("no drain in these tests")

    async def lag(self, url: str, *, peers: Sequence[str] = ()) -> int:
        raise AssertionError("no drain in these tests")

    async def open(self, broker: Mapping[str, Any], spec: BrokerSpec) -> GroupClient:
        return self


def live(*, settled: bool, replicas: int = 2, ready: int | None = None) -> dict[str, Any]:
    """A live StatefulSet's metadata, spec and status as the controller reports them."""
    return {"metadata": {"generation": 3}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": 3, "currentRevision": "r1", "replicas": replicas,
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


def test_a_settled_group_whose_master_lacks_a_follower_stays_the_target() -> None:
    sets = [live(settled=True), live(settled=False), live(settled=True)]
    assert roll_target(sets, [False, True, True]) == 0
    assert roll_target(sets, [True, True, False]) == 1, "an unsettled group comes first"
    assert roll_target(sets) == 1, "nothing asked: Ready pods decide"


def test_caught_up_is_every_follower_in_sync() -> None:
    assert caught_up({"followers_in_sync": 2}, replicas=3)
    assert not caught_up({"followers_in_sync": 1}, replicas=3)
    assert not caught_up({"followers": []}, replicas=2)
    assert caught_up({"followers_in_sync": 0}, replicas=1)


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


def _run(api: FakeApi, body: dict[str, Any], masters: FakeMasters) -> Outcome:
    return asyncio.run(reconcile(api, body, settings=SETTINGS,  # type: ignore[arg-type]
                                 now="2030-01-01T00:00:00Z", open_client=masters.open))


def _progressing(outcome: Outcome) -> dict[str, Any]:
    return next(c for c in outcome.status["conditions"] if c["type"] == "Progressing")


def test_a_change_rolls_group_0_then_each_next_group_once_the_one_before_settles() -> None:
    api = FakeApi()
    body = broker(spec=CLUSTER)
    masters = FakeMasters()

    def run() -> None:
        _run(api, body, masters)

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


def test_the_next_group_waits_until_the_masters_followers_are_back_in_sync() -> None:
    """Group 0's pods are all updated and Ready, but its master counts no follower in sync
    (the follower has not reconnected to the restarted master): group 1 holds, and the
    condition says why; once the follower is back, group 1 rolls."""
    api, body, masters = FakeApi(), broker(spec=CLUSTER), FakeMasters()
    _run(api, body, masters)
    for group in GROUPS:
        _set_status(api, group, settled=False)
    _set_status(api, "demo", settled=True)
    masters.in_sync["demo"] = 0
    outcome = _run(api, body, masters)
    assert _partitions(api) == [0, 2, 2]
    assert masters.asked == ["demo"], "asked in order, only up to the group that holds"
    progressing = _progressing(outcome)
    assert (progressing["status"], progressing["reason"]) == ("True", "WaitingForReplication")
    assert "demo's master has 0 of 1 followers in sync" in progressing["message"]
    assert "demo-g1, demo-g2 rolls once" in progressing["message"]
    masters.unreachable.add("demo")
    outcome = _run(api, body, masters)
    assert _partitions(api) == [0, 2, 2], "a master that cannot be asked holds the roll too"
    assert "could not be asked" in _progressing(outcome)["message"]
    masters.unreachable.clear()
    masters.in_sync["demo"] = 1
    outcome = _run(api, body, masters)
    assert _partitions(api) == [2, 0, 2]
    assert _progressing(outcome)["reason"] == "RollingUpdate"


def test_a_lagging_follower_with_no_roll_pending_is_not_progress() -> None:
    api, body, masters = FakeApi(), broker(spec=CLUSTER), FakeMasters()
    _run(api, body, masters)
    for group in GROUPS:
        _set_status(api, group, settled=True)
    masters.in_sync["demo-g1"] = 0
    outcome = _run(api, body, masters)
    assert _progressing(outcome)["status"] == "False", "nothing waits to roll"
    assert _partitions(api) == [2, 0, 2], "group 1 would take a change first"
    assert masters.asked[-2:] == ["demo", "demo-g1"]


def test_one_group_has_no_partition() -> None:
    api = FakeApi()
    asyncio.run(reconcile(api, broker(spec={"storage": {"size": "10Gi"}, "replicas": 2}),
                          settings=SETTINGS, now="2030-01-01T00:00:00Z"))  # type: ignore[arg-type]
    sts = api.objects[object_path("apps/v1", "StatefulSet", "ns1", "demo")]
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
