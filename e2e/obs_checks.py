"""What the observability test asks Prometheus, as functions returning the problems found
(an empty list is a pass), so a failure names every bad query at once."""

from __future__ import annotations

import math
import time
from typing import Any

from .obs_queries import (
    RATE_INTERVAL,
    PanelQuery,
    load_dashboard,
    panel_queries,
    variable_queries,
)
from .prometheus import PrometheusApi, QueryError


def query_problem(prometheus: PrometheusApi, query: PanelQuery) -> str | None:
    """None if the query parses, returns at least one series, and some value is a number
    (not NaN: a quantile of no observations, a ratio of two zero rates)."""
    where = f"{query.dashboard} / {query.panel!r} ({query.legend}): {query.expr}"
    try:
        result = prometheus.query(query.expr)
    except QueryError as error:
        return f"{where}\n    error: {error}"
    if not result:
        return f"{where}\n    empty result"
    if not any(math.isfinite(float(series["value"][1])) for series in result):
        return f"{where}\n    only NaN values: {result}"
    return None


def dashboard_problems(prometheus: PrometheusApi, dashboard_path: Any, *, namespace: str,
                       broker: str, timeout_s: float,
                       rate_interval: str = RATE_INTERVAL) -> list[str]:
    """Every panel query of one dashboard, asked again until all pass or `timeout_s` ends
    (series appear as the workload goes on: a rate needs two scrapes, a segment roll)."""
    dashboard = load_dashboard(dashboard_path)
    queries = panel_queries(dashboard, namespace=namespace, broker=broker,
                            rate_interval=rate_interval)
    assert queries, f"{dashboard_path.name} has no queries"
    deadline = time.monotonic() + timeout_s
    while True:
        problems = [p for q in queries if (p := query_problem(prometheus, q)) is not None]
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(1.0)


def variable_problems(prometheus: PrometheusApi, dashboard_path: Any, *,
                      expected: dict[str, str], namespace: str, broker: str) -> list[str]:
    """Each `label_values(match, label)` variable, asked of Prometheus' label values API:
    the value the test labelled its targets with must be offered."""
    dashboard = load_dashboard(dashboard_path)
    problems = []
    for name, match, label in variable_queries(dashboard, namespace=namespace, broker=broker):
        params = {"match[]": match} if match else {}
        values = prometheus.api(f"label/{label}/values", **params)
        if expected[name] not in values:
            problems.append(f"{dashboard['uid']} ${name}: label_values({match}, {label}) "
                            f"= {values}, no {expected[name]!r}")
    return problems


def firing_pods(prometheus: PrometheusApi) -> dict[str, set[str]]:
    """Alert name → the `pod` labels it fires for right now."""
    firing: dict[str, set[str]] = {}
    for alert in prometheus.alerts():
        if alert["state"] == "firing":
            firing.setdefault(alert["labels"]["alertname"], set()).add(
                alert["labels"].get("pod", ""))
    return firing


def wait_alerts(prometheus: PrometheusApi, expected: dict[str, set[str]], *,
                timeout_s: float) -> dict[str, set[str]]:
    """Until every alert has fired for each of its pods (seen at any poll, as an alert may
    resolve and fire again while a disk is cleaned and refilled); returns what never did."""
    seen: dict[str, set[str]] = {name: set() for name in expected}
    deadline = time.monotonic() + timeout_s
    while True:
        for name, pods in firing_pods(prometheus).items():
            seen.setdefault(name, set()).update(pods)
        missing = {name: pods - seen[name] for name, pods in expected.items()
                   if pods - seen[name]}
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.5)


def alert_history(prometheus: PrometheusApi, selector: str, *, start_s: float) -> list[str]:
    """Every alert that was pending or firing for `selector` at any evaluation since
    `start_s` (the ALERTS series Prometheus writes at each rule evaluation)."""
    series = prometheus.query_range(f"ALERTS{{{selector}}}", start_s=start_s,
                                    end_s=time.time(), step_s=1.0)
    return [f"{s['metric']['alertname']} {s['metric'].get('alertstate')} "
            f"{s['metric'].get('pod', '')}" for s in series]
