"""The operator's own Prometheus metrics: reconcile passes, failures and durations.

No `_created` series (see services/common/observability/metrics.py): Prometheus would store them
as gauges.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

disable_created_metrics()  # type: ignore[no-untyped-call]

REGISTRY = CollectorRegistry()

RECONCILES = Counter(
    "mqstore_operator_reconciles_total", "Reconcile passes over a Broker, by trigger "
    "(create, update, resume, timer) and result (ok, degraded, paused, retry, error).",
    ["trigger", "result"], registry=REGISTRY)
FAILURES = Counter(
    "mqstore_operator_reconcile_failures_total", "Passes that raised, by exception type "
    "(each is retried by kopf).", ["trigger", "error"], registry=REGISTRY)
DURATION = Histogram(
    "mqstore_operator_reconcile_duration_seconds", "Wall time of one reconcile pass, "
    "API calls included.", ["trigger"], registry=REGISTRY,
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0))
EVENTS = Counter(
    "mqstore_operator_events_total", "Kubernetes Events the operator posted, by reason.",
    ["reason"], registry=REGISTRY)
