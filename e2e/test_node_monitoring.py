"""The chart's monitoring on the real node, the way a cluster with the Prometheus Operator
runs it: the operator turns the chart's PodMonitor, ServiceMonitor and PrometheusRule into
the configuration of a Prometheus pod that discovers the broker and operator pods through
the real API server, and every query of every dashboard the chart ships returns numbers
from those pods.  Both are built from the Go module proxy (e2e/build-monitoring.sh): Debian's
prometheus, which the loopback tests run, was built without Kubernetes service discovery.

One stack for the module (e2e/monitoring.py): the operator and Prometheus in a namespace of
their own, the session's chart release (e2e/node_release.py, whose operator handles every
Broker on the node) upgraded for the module to turn its monitors on, labelled for that
Prometheus and scraping every 5 s, a two-pod sync-master Broker with a write-buffer pool,
and a pod of the mqstore image producing and consuming through the Broker's Service
(e2e/monitoring_workload.py).
The operator dashboard's failure and event panels get their data from a refused scale-down
and an admission webhook that is down, as in test_observability.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from . import monitoring
from . import monitoring_manifests as manifests
from .kube import Kube, condition, wait_for
from .monitoring import MonitoringBuild, Stack
from .node_pods import keys_env, pod, python_command, restricted_namespace
from .node_release import RELEASE, upgraded_release
from .node_state import Node
from .obs_checks import dashboard_problems, variable_problems
from .obs_queries import DASHBOARDS, alert_rules
from .obs_scenarios import broken_webhook

pytestmark = pytest.mark.timeout(900)
"""The first test brings the node and the stack up: about 2 min measured, 5 min allowed
for each of the three waits below on a loaded machine."""

WORKLOAD = Path(__file__).resolve().parent / "monitoring_workload.py"
BROKER = "watched"
SCRAPE_INTERVAL = manifests.SCRAPE_INTERVAL
RATE_INTERVAL = "1m"
"""`$__rate_interval` for these queries.  The storage dashboard divides two rates of segment
preallocations, so a window must hold a segment roll: segments are at least 64 MiB (the
CRD's minimum) and the workload rolls one every ~30 s (a 70 MiB burst: 2.4 MB/s, written
twice with the follower, is what two shared cores carry beside the node), so 1 m (12
scrapes at 5 s; what Grafana picks for a range of a few hours) always holds one."""
BURST_BYTES = 70 * 2**20
BURST_EVERY_S = 30
WORKLOAD_DURATION_S = 1800
"""Longer than the module: its namespace is deleted when the module ends."""
BROKER_READY_TIMEOUT_S = 240.0
"""Two pods of three containers each, one after the other, their volumes, probes and the
pool's buffers: about 60 s measured on a loaded 2-core machine."""
TARGETS_TIMEOUT_S = 120.0
"""The operator's reconcile of the monitors (it watches them), the config reloader's
reload and two scrape intervals."""
DATA_TIMEOUT_S = 150.0
"""Rates need a full window (1 m) after the first scrape, plus a segment roll in it."""
SMALL = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
WRITER = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
"""The writer maps two 64 MiB pool buffers and the active segment."""


@dataclass(frozen=True)
class Watched:
    stack: Stack
    operator_namespace: str
    broker_namespace: str


def _monitor_values() -> list[str]:
    """The chart's monitors on, labelled for our Prometheus: values for the session's
    release, whose operator stays the one that handles every Broker."""
    label = manifests.SELECTOR_LABEL.replace(".", "\\.")  # helm --set: a dot in a key
    values = []
    for monitor in ("podMonitor", "serviceMonitor", "prometheusRule"):
        values += [f"monitoring.{monitor}.enabled=true",
                   f"monitoring.{monitor}.labels.{label}={monitoring.PROMETHEUS_NAME}"]
    for monitor in ("podMonitor", "serviceMonitor"):
        values += [f"monitoring.{monitor}.interval={SCRAPE_INTERVAL}",
                   f"monitoring.{monitor}.scrapeTimeout={SCRAPE_INTERVAL}"]
    return values


def _broker(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "mqstore.io/v1alpha1", "kind": "Broker",
            "metadata": {"name": BROKER, "namespace": namespace},
            "spec": {"replicas": 2, "replication": {"mode": "sync"},
                     "storage": {"size": "1Gi", "segmentSizeBytes": 64 * 2**20},
                     "pool": {"enabled": True, "bufferCount": 2},
                     "writer": {"resources": WRITER}, "indexer": {"resources": SMALL},
                     "notifier": {"resources": SMALL}}}


def _workload(image: str, namespace: str) -> dict[str, Any]:
    service = f"http://{BROKER}.{namespace}.svc"
    command = [*python_command(WORKLOAD.read_text()), f"{service}:8081", f"{service}:8083",
               str(WORKLOAD_DURATION_S), str(BURST_BYTES), str(BURST_EVERY_S)]
    return pod("workload", namespace, image, {"traffic": command},
               env=keys_env(f"{BROKER}-users"))


@pytest.fixture(scope="module")
def watched(node: Node, node_kube: Kube, node_release: str,
            monitoring_build: MonitoringBuild) -> Iterator[Watched]:
    stack = monitoring.up(node, monitoring_build)
    try:
        with upgraded_release(node_kube, node_release, _monitor_values()):
            yield from _watched_broker(node, node_kube, stack, operator_namespace=node_release)
    finally:
        monitoring.down(node, stack.namespace)


def _watched_broker(node: Node, kube: Kube, stack: Stack, *,
                    operator_namespace: str) -> Iterator[Watched]:
    """The Broker under traffic, for the module; its namespace goes when the module ends."""
    image = node.images["mqstore"]
    broker_namespace = restricted_namespace(kube)
    try:
        kube.apply(_broker(broker_namespace))
        wait_for("the Broker to be Ready", lambda: (condition(
            kube.get("broker", BROKER, broker_namespace), "Ready") or {}).get(
                "status") == "True", timeout_s=BROKER_READY_TIMEOUT_S)
        kube.kubectl("create", "-f", "-", stdin=json.dumps(_workload(image, broker_namespace)))
        yield Watched(stack, operator_namespace, broker_namespace)
    finally:
        # The traffic and the Broker's pods end here, not when the node goes down: other
        # node tests of the session share its two cores.
        kube.kubectl("delete", "namespace", broker_namespace, "--wait=false")


def _scrape_pools(watched: Watched, seen: list[str]) -> dict[str, list[dict[str, Any]]] | None:
    """Active targets by scrape pool, once each of this module's namespaces has been scraped
    successfully (other tests' Brokers may come and go); `seen` gets each target's state,
    for the message of a timeout."""
    active = watched.stack.api.api("targets", state="active")["activeTargets"]
    seen[:] = [f"{t['scrapePool']} {t['scrapeUrl']} {t['health']} {t['lastError']}"
               for t in active]
    pools: dict[str, list[dict[str, Any]]] = {}
    for target in active:
        pools.setdefault(target["scrapePool"], []).append(target)
    ours = [t for t in active if t["labels"].get("namespace") in (
        watched.broker_namespace, watched.operator_namespace)]
    if not ours or any(t["health"] != "up" for t in ours):
        return None
    return pools


def test_the_operator_turns_the_charts_monitors_into_scrape_jobs(watched: Watched) -> None:
    brokers = f"podMonitor/{watched.operator_namespace}/{RELEASE}-brokers"
    operator = f"serviceMonitor/{watched.operator_namespace}/{RELEASE}-operator/0"
    expected = {f"{brokers}/{port}" for port in range(3)} | {operator}
    seen: list[str] = []

    ours_expected = sorted((BROKER, f"{BROKER}-{ordinal}", container) for ordinal in range(2)
                           for container in ("writer", "indexer", "notifier"))

    def ours(pools: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str, str]]:
        return sorted((t["labels"].get("broker", ""), t["labels"]["pod"], t["labels"]["container"])
                      for pool in expected - {operator} for t in pools.get(pool, [])
                      if t["labels"].get("namespace") == watched.broker_namespace)

    def discovered() -> dict[str, list[dict[str, Any]]] | None:
        """Both pods' containers found (the second pod may start after the Broker is
        Ready) and every target of ours scraped."""
        pools = _scrape_pools(watched, seen)
        if pools is None or set(pools) != expected or ours(pools) != ours_expected:
            return None
        return pools

    try:
        pools = wait_for(f"targets {sorted(expected)} up", discovered,
                         timeout_s=TARGETS_TIMEOUT_S)
    except AssertionError as error:
        raise AssertionError(f"{error}\nactive targets:\n" + "\n".join(seen)) from None
    # One target per container port of each broker pod (the wait's condition), every one
    # labelled as the dashboards select (the PodMonitor looks in every namespace: other
    # tests' Brokers are there too).
    broker_targets = [t["labels"] for pool in expected - {operator} for t in pools[pool]]
    assert all(t.get(label) for t in broker_targets
               for label in ("namespace", "broker", "pod", "container")), broker_targets
    [operator_target] = pools[operator]
    assert operator_target["labels"]["namespace"] == watched.operator_namespace
    assert operator_target["labels"]["pod"].startswith(f"{RELEASE}-")


def test_the_charts_rules_are_loaded_and_evaluate(watched: Watched) -> None:
    """The PrometheusRule as a rule file of the running Prometheus, every rule evaluated
    against the pods' series without error."""
    names = {rule["alert"] for rule in alert_rules()}

    def evaluated() -> dict[str, str] | None:
        health = watched.stack.api.rule_health()
        return health if set(health) == names and "unknown" not in health.values() else None

    health = wait_for("the chart's rules loaded and evaluated", evaluated,
                      timeout_s=TARGETS_TIMEOUT_S)
    bad = {name: state for name, state in health.items() if state != "ok"}
    assert not bad, bad


def test_every_broker_dashboard_query_returns_data_from_the_pods(watched: Watched) -> None:
    problems = []
    for name in ("mqstore-overview.json", "mqstore-storage.json"):
        problems += dashboard_problems(
            watched.stack.api, DASHBOARDS / name, namespace=watched.broker_namespace,
            broker=BROKER, timeout_s=DATA_TIMEOUT_S, rate_interval=RATE_INTERVAL)
        problems += variable_problems(
            watched.stack.api, DASHBOARDS / name, namespace=watched.broker_namespace,
            broker=BROKER, expected={"namespace": watched.broker_namespace, "broker": BROKER})
    assert not problems, "\n".join(problems)


def test_the_operator_dashboard_has_data_from_the_operator_pod(watched: Watched,
                                                               node_kube: Kube) -> None:
    """A refused scale-down posts a Warning Event; a webhook that is down makes every pass
    over the Broker fail (its pods keep running): the panels of both get series.  (One
    replica needs async replication: the CRD refuses a sync master without a follower.)"""
    api, namespace = watched.stack.api, watched.broker_namespace
    node_kube.merge_patch("broker", BROKER, namespace,
                          {"spec": {"replicas": 1, "replication": {"mode": "async"}}})
    webhook = broken_webhook(namespace)
    node_kube.apply(webhook)
    try:
        wait_for("reconcile failures scraped from the operator pod", lambda: api.query(
            f'mqstore_operator_reconcile_failures_total{{namespace="{watched.operator_namespace}"}}'
            ' > 0'), timeout_s=DATA_TIMEOUT_S)
        dashboard = DASHBOARDS / "mqstore-operator.json"
        problems = dashboard_problems(api, dashboard, namespace=watched.operator_namespace,
                                      broker="", timeout_s=DATA_TIMEOUT_S,
                                      rate_interval=RATE_INTERVAL)
        problems += variable_problems(api, dashboard, namespace=watched.operator_namespace,
                                      broker="",
                                      expected={"namespace": watched.operator_namespace})
    finally:
        node_kube.kubectl("delete", "validatingwebhookconfiguration",
                          webhook["metadata"]["name"])
    assert not problems, "\n".join(problems)
    refused = api.query('mqstore_operator_events_total{reason="ScaleDownRefused"} > 0')
    assert refused, "the refused scale-down was never counted"
