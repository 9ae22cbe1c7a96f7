"""The operator as a process: pausing, restarting (resume), and its own metrics."""

from __future__ import annotations

import time

from .conftest import RESYNC_INTERVAL_S, OperatorProcess, broker_manifest
from .kube import Kube, condition, wait_for


def _config_text(kube: Kube, namespace: str, name: str) -> str:
    text: str = kube.must_get("configmap", f"{name}-config", namespace)["data"]["mqstore.yaml"]
    return text


def test_pause_stops_changes_until_resumed(kube: Kube, namespace: str) -> None:
    kube.apply(broker_manifest("eta", namespace))
    wait_for("the ConfigMap", lambda: kube.get("configmap", "eta-config", namespace))
    kube.kubectl("annotate", "broker/eta", "-n", namespace,
                 "mqstore.io/pause-reconciliation=true")
    paused = wait_for("ReconciliationPaused=True", lambda: (c := condition(kube.get(
        "broker", "eta", namespace), "ReconciliationPaused")) and c["status"] == "True" and c)
    assert "mqstore.io/pause-reconciliation" in paused["message"]
    generation_before = kube.must_get("broker", "eta", namespace)["status"][
        "observedGeneration"]
    kube.merge_patch("broker", "eta", namespace, {"spec": {"flush": {"mode": "sync"}}})
    time.sleep(3 * float(RESYNC_INTERVAL_S))  # three resync passes, each of which must wait
    assert "flush_mode: async" in _config_text(kube, namespace, "eta")
    status = kube.must_get("broker", "eta", namespace)["status"]
    assert status["observedGeneration"] == generation_before
    kube.kubectl("annotate", "broker/eta", "-n", namespace, "mqstore.io/pause-reconciliation-")
    wait_for("the flush change", lambda: "flush_mode: sync" in _config_text(
        kube, namespace, "eta"))
    wait_for("ReconciliationPaused=False", lambda: condition(kube.get(
        "broker", "eta", namespace), "ReconciliationPaused")["status"] == "False")  # type: ignore[index]
    kube.merge_patch("broker", "eta", namespace, {"spec": {"paused": True,
                                                            "flush": {"mode": "async"}}})
    wait_for("spec.paused to pause", lambda: (condition(kube.get(
        "broker", "eta", namespace), "ReconciliationPaused") or {}).get("message", "")
        .startswith("spec.paused"))
    assert "flush_mode: sync" in _config_text(kube, namespace, "eta")


def test_a_restarted_operator_resumes_and_applies_what_changed_meanwhile(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    kube.apply(broker_manifest("theta", namespace))
    kube.apply(broker_manifest("kappa", namespace))
    wait_for("the ConfigMaps", lambda: kube.get("configmap", "theta-config", namespace)
             and kube.get("configmap", "kappa-config", namespace))
    assert operator.stop() == 0, operator.log_tail()
    kube.merge_patch("broker", "theta", namespace, {"spec": {"flush": {"intervalMs": 123}}})
    time.sleep(1.0)
    assert "flush_interval_ms: 500" in _config_text(kube, namespace, "theta")
    operator.start()
    wait_for("the change made while the operator was down", lambda: (
        "flush_interval_ms: 123" in _config_text(kube, namespace, "theta")))
    # The new process's counters: the changed Broker is an update, the unchanged one a
    # resume (kopf tells them apart by the last handled spec it keeps in an annotation).
    metrics = wait_for("update and resume passes in the metrics", lambda: (
        m := operator.metrics()) and 'trigger="resume"' in m and 'trigger="update"' in m and m)
    assert "mqstore_operator_reconciles_total" in metrics
    kappa = kube.must_get("broker", "kappa", namespace)
    assert "mqstore.io/last-handled-configuration" in kappa["metadata"]["annotations"]


def test_operator_metrics_count_passes_and_durations(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    kube.apply(broker_manifest("iota", namespace))
    wait_for("a timer pass", lambda: 'trigger="timer"' in operator.metrics())
    metrics = operator.metrics()
    passes = [line for line in metrics.splitlines()
              if line.startswith("mqstore_operator_reconciles_total{")]
    assert any('result="ok"' in line for line in passes), passes
    assert "mqstore_operator_reconcile_duration_seconds_bucket" in metrics
    assert "mqstore_operator_reconcile_failures_total" in metrics
