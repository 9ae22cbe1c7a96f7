"""Removing a group: read only first, deleted (claims kept) only at lag 0 or when forced,
highest group first, given its writes back when wanted again, never deleted while its
notifier cannot be reached."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping, Sequence
from typing import Any

from mqstore.operator import names
from mqstore.operator.drain import (
    FORCE_SCALE_IN_ANNOTATION,
    GroupClient,
    GroupUnreachable,
    group_objects,
    may_delete,
    next_step,
    notifier_url,
)
from mqstore.operator.group_http_client import admin_keys
from mqstore.operator.kube import object_path
from mqstore.operator.reconcile import Outcome, reconcile
from mqstore.operator.settings import OperatorSettings
from mqstore.operator.spec import BrokerSpec

from .broker_fixtures import broker
from .fake_api import FakeApi

SETTINGS = OperatorSettings(broker_image="registry.example/mqstore:1")
CLUSTER = {"storage": {"size": "10Gi"}, "replicas": 1, "groups": 3,
           "nameServer": {"replicas": 1}}
NOW = "2030-01-01T00:00:00Z"


class FakeNotifiers:
    """Each group's notifier: its permission, its lag, or unreachable."""

    def __init__(self) -> None:
        self.permissions: dict[str, int] = {}
        self.lags: dict[str, int] = {}
        self.unreachable: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.peers: dict[str, list[str]] = {}
        """The other groups each lag measure asked, by the group measured."""

    def _group(self, url: str) -> str:
        group = url.split("://")[1].split(".", maxsplit=1)[0].removesuffix("-0")
        if group in self.unreachable:
            raise GroupUnreachable(f"{url}: connection refused")
        return group

    async def set_permission(self, url: str, *, permission: int) -> None:
        group = self._group(url)
        self.calls.append((group, f"permission {permission}"))
        self.permissions[group] = permission

    async def lag(self, url: str, *, peers: Sequence[str] = ()) -> int:
        group = self._group(url)
        self.peers[group] = [self._group(peer) for peer in peers]
        self.calls.append((group, "lag"))
        return self.lags.get(group, 0)

    async def replication(self, url: str) -> Mapping[str, Any]:
        raise AssertionError("one pod per group here: no followers to ask about")

    async def open(self, broker: Mapping[str, Any], spec: BrokerSpec) -> GroupClient:
        return self


def run(api: FakeApi, notifiers: FakeNotifiers, body: dict[str, Any]) -> Outcome:
    outcome = asyncio.run(reconcile(api, body, settings=SETTINGS, now=NOW,  # type: ignore[arg-type]
                                    open_client=notifiers.open))
    body["status"] = outcome.status  # what the handler stores, for the next pass
    return outcome


def sts(name: str) -> str:
    return object_path("apps/v1", "StatefulSet", "ns1", name)


def progressing(outcome: Outcome) -> tuple[str, str, str]:
    found = next(c for c in outcome.status["conditions"] if c["type"] == "Progressing")
    return found["status"], found["reason"], found["message"]


def three_groups() -> tuple[FakeApi, FakeNotifiers, dict[str, Any]]:
    api, notifiers = FakeApi(), FakeNotifiers()
    body = broker(spec=CLUSTER)
    run(api, notifiers, body)
    for index in range(3):  # the claims the StatefulSets' controller would create
        group = names.group_name("demo", index)
        api.put({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
            "name": f"data-{group}-0", "namespace": "ns1",
            "labels": names.selector_labels(group)}})
    assert notifiers.calls == [], "nothing to drain: the notifiers are not called"
    return api, notifiers, body


def test_the_decisions() -> None:
    assert next_step(live_groups=3, wanted_groups=1, draining_index=None).group_index == 2
    assert next_step(live_groups=3, wanted_groups=2, draining_index=2).action == "drain"
    assert next_step(live_groups=3, wanted_groups=3, draining_index=2).action == "undrain"
    assert next_step(live_groups=2, wanted_groups=2, draining_index=2).action == "none"
    assert next_step(live_groups=2, wanted_groups=3, draining_index=None).action == "none"
    assert may_delete(lag=0, forced=False)
    assert not may_delete(lag=5, forced=False)
    assert not may_delete(lag=None, forced=False)
    assert may_delete(lag=None, forced=True)
    assert notifier_url("demo-g2", "ns1", scheme="https") == \
        "https://demo-g2-0.demo-g2-headless.ns1.svc:8083"
    assert [kind for _, kind, _ in group_objects("demo-g2")] == [
        "StatefulSet", "ConfigMap", "Service", "Service", "PodDisruptionBudget",
        "NetworkPolicy", "Deployment", "Service", "NetworkPolicy"]
    assert "PersistentVolumeClaim" not in {kind for _, kind, _ in group_objects("demo-g2")}


def test_a_lagging_group_is_read_only_and_kept_then_deleted_at_lag_0() -> None:
    api, notifiers, body = three_groups()
    notifiers.lags["demo-g2"] = 7
    body["spec"] = {**CLUSTER, "groups": 2}
    lagging = run(api, notifiers, body)
    assert notifiers.permissions == {"demo-g2": 4}
    assert progressing(lagging)[:2] == ("True", "Draining")
    assert "demo-g2" in progressing(lagging)[2] and "7 messages" in progressing(lagging)[2]
    assert lagging.status["draining"] == {"group": "demo-g2", "lag": 7, "since": NOW}
    assert sts("demo-g2") in api.objects
    assert [g["name"] for g in lagging.status["groups"]] == ["demo", "demo-g1", "demo-g2"]
    assert not any(c["status"] == "True" for c in lagging.status["conditions"]
                   if c["type"] == "Degraded")
    body["status"]["draining"]["since"] = "2029-12-31T00:00:00Z"
    notifiers.lags["demo-g2"] = 0
    done = run(api, notifiers, body)
    assert sts("demo-g2") not in api.objects
    for api_version, kind, name in group_objects("demo-g2"):
        assert object_path(api_version, kind, "ns1", name) not in api.objects
    assert object_path("v1", "PersistentVolumeClaim", "ns1", "data-demo-g2-0") in api.objects
    assert done.status["draining"] is None
    assert [g["name"] for g in done.status["groups"]] == ["demo", "demo-g1"]
    assert sts("demo-g1") in api.objects


def test_the_highest_group_goes_first_one_at_a_time() -> None:
    api, notifiers, body = three_groups()
    notifiers.lags.update({"demo-g2": 3, "demo-g1": 0})
    body["spec"] = {**CLUSTER, "groups": 1}
    run(api, notifiers, body)
    assert notifiers.calls == [("demo-g2", "permission 4"), ("demo-g2", "lag")]
    assert notifiers.peers == {"demo-g2": ["demo", "demo-g1"]}, "every group's consumers"
    assert sts("demo-g1") in api.objects, "g1 waits while g2 drains"
    notifiers.lags["demo-g2"] = 0
    outcome = run(api, notifiers, body)
    assert sts("demo-g2") not in api.objects and sts("demo-g1") not in api.objects
    assert [group for group, _ in notifiers.calls[2:]] == ["demo-g2", "demo-g2", "demo-g1",
                                                           "demo-g1"]
    assert [g["name"] for g in outcome.status["groups"]] == ["demo"]
    assert notifiers.peers["demo-g1"] == ["demo"]


def test_force_deletes_without_waiting_and_keeps_the_claims() -> None:
    api, notifiers, body = three_groups()
    notifiers.lags["demo-g2"] = 1000
    body["spec"] = {**CLUSTER, "groups": 2}
    run(api, notifiers, body)
    body["metadata"]["annotations"] = {FORCE_SCALE_IN_ANNOTATION: "true"}
    run(api, notifiers, body)
    assert sts("demo-g2") not in api.objects
    assert object_path("v1", "PersistentVolumeClaim", "ns1", "data-demo-g2-0") in api.objects


def test_raising_groups_gives_a_draining_group_its_writes_back() -> None:
    api, notifiers, body = three_groups()
    notifiers.lags["demo-g2"] = 5
    body["spec"] = {**CLUSTER, "groups": 2}
    run(api, notifiers, body)
    body["spec"] = CLUSTER
    raised = run(api, notifiers, body)
    assert notifiers.permissions == {"demo-g2": 6}
    assert raised.status["draining"] is None
    assert progressing(raised)[1] != "Draining"
    assert sts("demo-g2") in api.objects
    run(api, notifiers, body)
    assert notifiers.calls[-1] == ("demo-g2", "permission 6"), "nothing more once undrained"
    assert len(notifiers.calls) == 3


def test_an_unreachable_notifier_is_reported_and_nothing_deleted() -> None:
    api, notifiers, body = three_groups()
    notifiers.unreachable.add("demo-g2")
    body["spec"] = {**CLUSTER, "groups": 2}
    outcome = run(api, notifiers, body)
    status, reason, message = progressing(outcome)
    assert (status, reason) == ("True", "Draining")
    assert "could not be reached" in message and "connection refused" in message
    assert outcome.status["draining"]["lag"] is None
    assert sts("demo-g2") in api.objects
    notifiers.unreachable.clear()
    notifiers.lags["demo-g2"] = 0
    run(api, notifiers, body)
    assert sts("demo-g2") not in api.objects, "the next pass tries again"


def test_an_unreachable_notifier_on_undrain_keeps_draining_until_it_answers() -> None:
    api, notifiers, body = three_groups()
    notifiers.lags["demo-g2"] = 5
    body["spec"] = {**CLUSTER, "groups": 2}
    run(api, notifiers, body)
    notifiers.unreachable.add("demo-g2")
    body["spec"] = CLUSTER
    stuck = run(api, notifiers, body)
    assert stuck.status["draining"]["group"] == "demo-g2"
    assert "still read only" in progressing(stuck)[2]
    notifiers.unreachable.clear()
    assert run(api, notifiers, body).status["draining"] is None
    assert notifiers.permissions == {"demo-g2": 6}


def test_a_paused_broker_drains_nothing() -> None:
    api, notifiers, body = three_groups()
    body["spec"] = {**CLUSTER, "groups": 2, "paused": True}
    run(api, notifiers, body)
    assert notifiers.calls == [] and sts("demo-g2") in api.objects


def test_the_admin_keys_come_from_the_generated_keys_or_the_users_file() -> None:
    def encoded(data: dict[str, str]) -> dict[str, Any]:
        return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}

    assert admin_keys(encoded({"accessKey": "mqstore-admin", "secretKey": "s3cret",
                               "plain_acl.yml": ""})) == ("mqstore-admin", "s3cret")
    users = ("accounts:\n  - {accessKey: reader, secretKey: r, admin: false}\n"
             "  - {accessKey: boss, secretKey: b, admin: true}\n")
    assert admin_keys(encoded({"plain_acl.yml": users})) == ("boss", "b")
    assert admin_keys(encoded({"plain_acl.yml": "accounts: []\n"})) is None
