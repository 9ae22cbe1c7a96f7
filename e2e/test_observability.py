"""The chart's dashboards and alerts against a real Prometheus (Debian's) scraping real
services and the real operator.

One Prometheus for the whole module, scraping a healthy broker and the sick ones
(e2e/obs_scenarios.py) plus the operator, with the chart's rule file loaded with every
`for:` at 0 s.  Every panel query of every dashboard must parse and return numbers for the
healthy broker; every alert must fire for the pods whose condition it describes and never
for the healthy broker.  The real `for:` durations are promtool's to test
(test_observability_rules.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import OPERATOR_NAMESPACE, OperatorProcess, broker_manifest
from .dashboard_picture import render
from .kube import Kube, wait_for
from .obs_checks import (
    alert_history,
    dashboard_problems,
    firing_pods,
    variable_problems,
    wait_alerts,
)
from .obs_queries import DASHBOARDS, alert_rules, load_dashboard, panels, write_rules_without_for
from .obs_scenarios import (
    EXPECTED,
    HEALTHY,
    SICK,
    WEBHOOK,
    Brokers,
    broken_webhook,
    start_healthy,
)
from .obs_stack import NAMESPACE
from .prometheus import Prometheus, Target

OPERATOR_POD = "mqstore-operator-0"
OPERATOR_ALERT = "MqstoreOperatorReconcileFailures"
HISTORY_S = 20.0
"""How long the healthy workload runs before the panels are asked: a rate over 15 s needs
the window filled, a preallocation rate a segment roll in it."""
ALERT_TIMEOUT_S = 90.0


@dataclass
class Observed:
    brokers: Brokers
    prometheus: Prometheus
    started_s: float
    """Wall time the workloads began (Prometheus timestamps are wall time)."""


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory,
             operator: OperatorProcess) -> Iterator[Observed]:
    root = tmp_path_factory.mktemp("observability")
    brokers = Brokers(root)
    prometheus: Prometheus | None = None
    try:
        start_healthy(brokers)
        sicken = [start(brokers) for start in SICK]
        rules = write_rules_without_for(root / "mqstore-alerts-for-0s.yaml")
        (root / "prometheus").mkdir()
        operator_target = Target("mqstore-operator", f"127.0.0.1:{operator.metrics_port}",
                                 {"namespace": OPERATOR_NAMESPACE, "pod": OPERATOR_POD})
        prometheus = Prometheus(root / "prometheus", rule_files=[rules],
                                targets=[*brokers.targets(), operator_target])
        prometheus.start()
        prometheus.wait_targets_up()
        started_s = time.time()
        for step in sicken:
            step()
        yield Observed(brokers, prometheus, started_s)
    finally:
        if prometheus is not None:
            prometheus.stop()
        brokers.teardown()


def test_every_alert_in_the_rule_file_is_caused_here() -> None:
    names = {rule["alert"] for rule in alert_rules()}
    assert names == {*EXPECTED, OPERATOR_ALERT}, (
        "an alert without a scenario that causes it (e2e/obs_scenarios.py), or a scenario "
        "for an alert that is gone")


def test_every_service_dashboard_query_returns_data(observed: Observed) -> None:
    time.sleep(max(0.0, observed.started_s + HISTORY_S - time.time()))
    problems = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        if path.name == "mqstore-operator.json":
            continue
        problems += variable_problems(observed.prometheus, path, namespace=NAMESPACE,
                                      broker=HEALTHY,
                                      expected={"namespace": NAMESPACE, "broker": HEALTHY})
        problems += dashboard_problems(observed.prometheus, path, namespace=NAMESPACE,
                                       broker=HEALTHY, timeout_s=20.0)
    assert not problems, "\n".join(problems)


def test_the_overview_picture_draws_every_panel_from_this_run(observed: Observed,
                                                              tmp_path: Path) -> None:
    """scripts/render_dashboard.py's drawing, on this run's data (docs/images/ has the
    picture of a longer run)."""
    out = tmp_path / "overview.png"
    got = render(observed.prometheus, DASHBOARDS / "mqstore-overview.json", out,
                 namespace=NAMESPACE, broker=HEALTHY, start_s=observed.started_s)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dashboard = load_dashboard(DASHBOARDS / "mqstore-overview.json")
    titles = {p["title"] for p in panels(dashboard["panels"]) if p["type"] != "row"}
    assert set(got) == titles
    assert all(got.values()), {title: n for title, n in got.items() if not n}


def test_each_alert_fires_for_the_pods_whose_condition_it_describes(
        observed: Observed) -> None:
    missing = wait_alerts(observed.prometheus, EXPECTED, timeout_s=ALERT_TIMEOUT_S)
    statuses = {w.pod.pod: w.statuses for w in observed.brokers.workloads}
    assert not missing, (f"never fired: {missing}; firing now: "
                         f"{firing_pods(observed.prometheus)}; put statuses: {statuses}")


def test_operator_failures_fire_and_the_operator_dashboard_has_data(
        observed: Observed, kube: Kube, namespace: str) -> None:
    prometheus = observed.prometheus
    # A Broker the operator reconciles, scaled down without the annotation: the refusal is
    # a Warning Event (the dashboard's events panel).
    kube.apply(broker_manifest("obs-op", namespace, replicas=2))
    wait_for("2 replicas", lambda: (kube.get("statefulset", "obs-op", namespace) or {}).get(
        "spec", {}).get("replicas") == 2)
    kube.kubectl("scale", "broker/obs-op", "-n", namespace, "--replicas=1")
    wait_for("the ScaleDownRefused event counted", lambda: prometheus.query(
        'mqstore_operator_events_total{reason="ScaleDownRefused"} > 0'))
    assert OPERATOR_ALERT not in firing_pods(prometheus), "failures in a healthy run"
    # An admission webhook that is down (failurePolicy Fail): the API server answers 500 to
    # every StatefulSet write in the namespace, and every pass over obs-op fails.
    kube.apply(broken_webhook(namespace))
    try:
        missing = wait_alerts(prometheus, {OPERATOR_ALERT: {OPERATOR_POD}},
                              timeout_s=ALERT_TIMEOUT_S)
    finally:
        kube.kubectl("delete", "validatingwebhookconfiguration", WEBHOOK)
    failures = prometheus.query("mqstore_operator_reconcile_failures_total")
    assert not missing, f"{OPERATOR_ALERT} never fired; failures: {failures}"
    operator_dashboard = DASHBOARDS / "mqstore-operator.json"
    problems = variable_problems(prometheus, operator_dashboard, namespace=OPERATOR_NAMESPACE,
                                 broker="", expected={"namespace": OPERATOR_NAMESPACE})
    problems += dashboard_problems(prometheus, operator_dashboard,
                                   namespace=OPERATOR_NAMESPACE, broker="", timeout_s=20.0)
    assert not problems, "\n".join(problems)


def test_the_healthy_broker_never_raised_an_alert(observed: Observed) -> None:
    """Last: the whole run's ALERTS series for the healthy broker, pending or firing (every
    `for:` is 0 s, so pending would have fired), and every rule evaluated without error."""
    raised = alert_history(observed.prometheus, f'broker="{HEALTHY}"',
                           start_s=observed.started_s - 60)
    assert not raised, raised
    health = observed.prometheus.rule_health()
    assert set(health) == {rule["alert"] for rule in alert_rules()}
    bad = {name: state for name, state in health.items() if state != "ok"}
    assert not bad, bad


def test_rule_copy_differs_only_in_for(tmp_path: Path) -> None:
    """The firing test loads a copy of the rule file; only `for:` (and the group interval)
    may differ from what users get."""
    copy = alert_rules(write_rules_without_for(tmp_path / "copy.yaml"))
    for original, loaded in zip(alert_rules(), copy, strict=True):
        assert {k: v for k, v in original.items() if k != "for"} == \
            {k: v for k, v in loaded.items() if k != "for"}
        assert loaded["for"] == "0s"
