"""Lint of the chart's Grafana dashboards: stable unique uids, a datasource variable used by
every panel and query, a unit on every panel, the namespace/broker selector on every series,
and only metric names from docs/metrics.md."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from .reference import DASHBOARD_DIR, ROOT, dashboards, documented_metrics, metric_families_in
from .reference import panels as all_panels

UIDS = {"mqstore-overview.json": "mqstore-overview", "mqstore-storage.json": "mqstore-storage",
        "mqstore-operator.json": "mqstore-operator"}
"""Fixed: links, bookmarks and provisioning refer to them."""
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
SERIES = re.compile(r"\b(mqstore_[a-z0-9_]+)(\{[^}]*\})?")
RANGE = re.compile(r"(\w+)\([^()\[]*\[([^\]]+)\]")
SCHEMA_VERSION_MIN = 39


def _targets(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [target for panel in all_panels(dashboard) for target in panel["targets"]]


def test_the_three_dashboards_have_their_fixed_uids() -> None:
    found = dashboards()
    assert {name: board["uid"] for name, board in found.items()} == UIDS
    assert len({board["uid"] for board in found.values()}) == len(found)
    for board in found.values():
        assert board["schemaVersion"] >= SCHEMA_VERSION_MIN
        assert board["title"].startswith("mqstore / ")


@pytest.mark.parametrize("name", sorted(UIDS))
def test_variables(name: str) -> None:
    board = dashboards()[name]
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    wanted = ["datasource", "namespace"] + ([] if name == "mqstore-operator.json" else ["broker"])
    assert list(variables) == wanted
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for key in wanted[1:]:
        assert variables[key]["type"] == "query"
        assert variables[key]["datasource"] == DATASOURCE
        assert re.fullmatch(r"label_values\(mqstore_\w+(\{[^}]*\})?, " + key + r"\)",
                            variables[key]["query"]), variables[key]["query"]
    if "broker" in variables:
        assert 'namespace="$namespace"' in variables["broker"]["query"]


@pytest.mark.parametrize("name", sorted(UIDS))
def test_every_panel_has_a_unit_a_datasource_and_queries(name: str) -> None:
    board = dashboards()[name]
    found = all_panels(board)
    assert found
    assert len({panel["id"] for panel in board["panels"]}) == len(board["panels"])
    for panel in found:
        title = panel["title"]
        assert panel["fieldConfig"]["defaults"]["unit"], f"{title} has no unit"
        assert panel["datasource"] == DATASOURCE, title
        assert panel["description"], f"{title} has no description"
        assert panel["targets"], f"{title} has no query"
        assert len({target["refId"] for target in panel["targets"]}) == len(panel["targets"])
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, title
            assert target["expr"].strip(), title


@pytest.mark.parametrize("name", sorted(UIDS))
def test_every_series_is_selected_by_namespace_and_broker(name: str) -> None:
    operator = name == "mqstore-operator.json"
    for target in _targets(dashboards()[name]):
        expr = target["expr"]
        series = SERIES.findall(expr)
        assert series, expr
        for metric, matchers in series:
            assert 'namespace="$namespace"' in matchers, f"{metric} in {expr}"
            assert ('broker="$broker"' in matchers) is not operator, f"{metric} in {expr}"


@pytest.mark.parametrize("name", sorted(UIDS))
def test_rates_use_the_rate_interval(name: str) -> None:
    """rate/increase windows follow the scrape interval ($__rate_interval); only deriv's
    time-to-full looks at a fixed hour."""
    for target in _targets(dashboards()[name]):
        for function, window in RANGE.findall(target["expr"]):
            if function in ("rate", "increase"):
                assert window == "$__rate_interval", target["expr"]
            else:
                assert function == "deriv", target["expr"]


def test_only_documented_metrics_are_queried() -> None:
    documented = documented_metrics()
    for name, board in dashboards().items():
        for target in _targets(board):
            unknown = metric_families_in(target["expr"], documented) - set(documented)
            assert not unknown, f"{name}: {sorted(unknown)} not in docs/metrics.md"


def _overview_row(title: str) -> list[dict[str, Any]]:
    """The panels under the overview's row `title`."""
    rows: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for item in dashboards()["mqstore-overview.json"]["panels"]:
        if item["type"] == "row":
            current = rows.setdefault(item["title"], [])
        else:
            current.append(item)
    return rows[title]


def test_the_overview_has_a_retries_row_with_every_retry_and_delay_series() -> None:
    """The row "Retries, dead letters and delays": send-backs and nacks by outcome, dead letters by
    path, the schedule's flow and what waits per level; nothing else queried there."""
    row = _overview_row("Retries, dead letters and delays")
    documented = documented_metrics()
    queried = {family for panel in row for target in panel["targets"]
               for family in metric_families_in(target["expr"], documented)}
    assert queried == {"mqstore_remoting_send_backs_total", "mqstore_nacks_total",
                       "mqstore_remoting_dead_letters_total",
                       "mqstore_delay_messages_scheduled_total",
                       "mqstore_delay_messages_delivered_total",
                       "mqstore_delay_messages_skipped_total",
                       "mqstore_delay_messages_waiting"}
    legends = {target["legendFormat"] for panel in row for target in panel["targets"]}
    assert {"{{outcome}}", "{{path}}", "level {{level}}"} <= legends


def test_the_overview_has_a_transactions_row_with_every_transaction_series() -> None:
    """The row "Transactions": ends by outcome (producers' and check answers apart), checks
    by outcome, the halves waiting and how old the last pass is; nothing else there."""
    row = _overview_row("Transactions")
    documented = documented_metrics()
    queried = {family for panel in row for target in panel["targets"]
               for family in metric_families_in(target["expr"], documented)}
    assert queried == {family for family in documented
                       if family.startswith("mqstore_remoting_transaction_")}
    assert len(queried) == 4
    exprs = [target["expr"] for panel in row for target in panel["targets"]]
    assert sum('from_check="true"' in expr for expr in exprs) == 1
    assert sum('from_check="false"' in expr for expr in exprs) == 1
    legends = {target["legendFormat"] for panel in row for target in panel["targets"]}
    assert {"{{outcome}}", "{{outcome}} (check answer)", "{{pod}}"} <= legends


def test_the_generator_reproduces_the_committed_files() -> None:
    """scripts/build_dashboards.py made the files; a hand edit would be lost on its next
    run, so the files must be exactly its output."""
    path = ROOT / "scripts" / "build_dashboards.py"
    spec = importlib.util.spec_from_file_location("build_dashboards", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in UIDS:
        assert module.render(name) == (DASHBOARD_DIR / name).read_text(), name
    assert {path.name for path in Path(DASHBOARD_DIR).glob("*.json")} == set(UIDS)
