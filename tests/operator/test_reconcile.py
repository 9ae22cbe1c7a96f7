"""One reconcile pass against an in-memory API: what it applies, refuses and reports."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from mqstore.operator import names
from mqstore.operator.kube import ApiError, object_path
from mqstore.operator.reconcile import Outcome, reconcile
from mqstore.operator.settings import OperatorSettings

from .broker_fixtures import broker
from .fake_api import FakeApi

SETTINGS = OperatorSettings(broker_image="registry.example/mqstore:1")
STS = object_path("apps/v1", "StatefulSet", "ns1", "demo")


def run(api: FakeApi, body: dict[str, Any]) -> Outcome:
    return asyncio.run(reconcile(api, body, settings=SETTINGS,  # type: ignore[arg-type]
                                 now="2030-01-01T00:00:00Z"))


def conditions(outcome: Outcome) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in outcome.status["conditions"]}


def add_claim(api: FakeApi, ordinal: int, size: str, *, phase: str = "Bound") -> None:
    api.put({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": names.claim_name("demo", ordinal), "namespace": "ns1",
                          "labels": names.selector_labels("demo")},
             "spec": {"resources": {"requests": {"storage": size}}},
             "status": {"phase": phase, "capacity": {"storage": size}}})


def test_first_pass_creates_every_child() -> None:
    api = FakeApi()
    outcome = run(api, broker())
    kinds = sorted(path.split("/")[-2] for path in api.objects)
    assert kinds == ["configmaps", "networkpolicies", "poddisruptionbudgets", "secrets",
                     "secrets", "services", "services", "statefulsets"]
    assert api.objects[STS]["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "registry.example/mqstore:1"
    assert conditions(outcome)["Progressing"] == ("True", "RollingUpdate")
    assert outcome.status["observedGeneration"] == 1
    assert outcome.result == "ok"
    assert outcome.events == []


def test_a_second_pass_changes_nothing() -> None:
    api = FakeApi()
    run(api, broker())
    before = {path: obj for path, obj in api.objects.items()}
    run(api, broker())
    assert api.objects == before


def test_scale_down_is_refused_without_the_annotation() -> None:
    api = FakeApi()
    run(api, broker(spec={"storage": {"size": "10Gi"}, "replicas": 3}))
    outcome = run(api, broker(spec={"storage": {"size": "10Gi"}, "replicas": 1}))
    assert api.objects[STS]["spec"]["replicas"] == 3
    assert conditions(outcome)["Degraded"] == ("True", "ScaleDownRefused")
    assert [event.reason for event in outcome.events] == ["ScaleDownRefused"]
    allowed = run(api, broker(spec={"storage": {"size": "10Gi"}, "replicas": 1},
                              annotations={names.ALLOW_SCALE_DOWN_ANNOTATION: "true"}))
    assert api.objects[STS]["spec"]["replicas"] == 1
    assert conditions(allowed)["Degraded"] == ("False", "AsExpected")


def test_paused_leaves_children_alone() -> None:
    api = FakeApi()
    run(api, broker())
    before = {path: obj for path, obj in api.objects.items()}
    outcome = run(api, broker(spec={"storage": {"size": "10Gi"}, "flush": {"mode": "sync"}},
                              annotations={names.PAUSE_ANNOTATION: "true"}))
    assert api.objects == before
    assert not [call for call in api.calls[-3:] if call[0] in ("APPLY", "PATCH")]
    assert conditions(outcome)["ReconciliationPaused"] == ("True", "Paused")
    assert outcome.result == "paused"


def test_growth_patches_bound_claims_and_reports_refusals() -> None:
    api = FakeApi()
    run(api, broker())
    add_claim(api, 0, "10Gi")
    add_claim(api, 1, "10Gi")
    claim_1 = object_path("v1", "PersistentVolumeClaim", "ns1", "data-demo-1")
    api.errors["PATCH", claim_1] = ApiError(
        403, "Forbidden", "only dynamically provisioned pvc can be resized", request="PATCH")
    outcome = run(api, broker(spec={"storage": {"size": "20Gi"}}))
    claim_0 = object_path("v1", "PersistentVolumeClaim", "ns1", "data-demo-0")
    assert api.objects[claim_0]["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert api.objects[STS]["spec"]["volumeClaimTemplates"][0]["spec"]["resources"][
        "requests"]["storage"] == "10Gi", "the claim template is immutable"
    assert conditions(outcome)["Degraded"] == ("True", "ChangeRefused")
    assert "data-demo-1" in outcome.status["conditions"][2]["message"]


def test_an_invalid_spec_touches_nothing_and_says_why() -> None:
    api = FakeApi()
    outcome = run(api, broker(spec={"storage": {"size": "10Gi"},
                                    "retention": {"diskWarningRatio": 0.1}}))
    assert not [call for call in api.calls if call[0] == "APPLY"]
    assert conditions(outcome)["Degraded"] == ("True", "InvalidSpec")
    assert "disk" in outcome.status["conditions"][2]["message"]


def test_a_refused_apply_is_degraded_and_a_retryable_one_raises() -> None:
    api = FakeApi()
    api.errors["APPLY", STS] = ApiError(422, "Invalid", "spec: Forbidden", request="PATCH")
    outcome = run(api, broker())
    assert conditions(outcome)["Degraded"] == ("True", "ChangeRefused")
    api.errors["APPLY", STS] = ApiError(503, "ServiceUnavailable", "etcd", request="PATCH")
    try:
        run(api, broker())
    except ApiError as error:
        assert error.retryable
    else:
        raise AssertionError("a 503 must propagate for kopf to retry")


def test_extra_notifiers_come_and_go() -> None:
    api = FakeApi()
    spec = {"storage": {"size": "10Gi", "accessModes": ["ReadWriteMany"]},
            "notifier": {"replicas": 2}}
    run(api, broker(spec=spec))
    deployment = object_path("apps/v1", "Deployment", "ns1", "demo-notifier")
    assert api.objects[deployment]["spec"]["replicas"] == 2
    spec["notifier"] = {"replicas": 0}
    run(api, broker(spec=spec))
    assert deployment not in api.objects


USERS = object_path("v1", "Secret", "ns1", "demo-users")
REPLICATION = object_path("v1", "Secret", "ns1", "demo-replication")
POLICY = object_path("networking.k8s.io/v1", "NetworkPolicy", "ns1", "demo")


def test_generated_secrets_are_created_once_and_never_rewritten(
        caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    with caplog.at_level(logging.DEBUG):
        outcome = run(api, broker())
    users = api.objects[USERS]
    secret_key = users["data"]["secretKey"]
    assert len(secret_key) >= 40
    assert secret_key in users["data"]["plain_acl.yml"]
    assert api.objects[REPLICATION]["data"]["replication-secret"] != secret_key
    assert users["metadata"]["ownerReferences"][0]["kind"] == "Broker"
    assert secret_key not in caplog.text
    assert secret_key not in repr(outcome)
    created = [call for call in api.calls if call[0] == "CREATE"]
    assert created == [("CREATE", USERS), ("CREATE", REPLICATION)]
    run(api, broker(spec={"storage": {"size": "10Gi"}, "flush": {"mode": "sync"}}))
    assert api.objects[USERS]["data"]["secretKey"] == secret_key
    assert [call for call in api.calls if call[0] == "CREATE"] == created, \
        "a later pass only reads the Secrets"
    assert ("APPLY", USERS) not in api.calls


def test_a_missing_named_secret_is_degraded_and_named() -> None:
    api = FakeApi()
    spec = {"storage": {"size": "10Gi"}, "security": {"usersSecret": "team-users"}}
    outcome = run(api, broker(spec=spec))
    assert conditions(outcome)["Degraded"] == ("True", "ChangeRefused")
    assert "Secret ns1/team-users (spec.security.usersSecret) does not exist" in \
        outcome.status["conditions"][2]["message"]
    assert USERS not in api.objects, "a named Secret is never generated"
    assert STS in api.objects, "the pods wait for the Secret; the rest is applied"
    api.put({"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": "team-users", "namespace": "ns1"},
             "data": {"plain_acl.yml": "eA=="}})
    assert conditions(run(api, broker(spec=spec)))["Degraded"] == ("False", "AsExpected")


def test_policies_off_deletes_the_network_policies() -> None:
    api = FakeApi()
    run(api, broker())
    assert api.objects[POLICY]["spec"]["policyTypes"] == ["Ingress"]
    run(api, broker(spec={"storage": {"size": "10Gi"}, "network": {"policies": False}}))
    assert POLICY not in api.objects
