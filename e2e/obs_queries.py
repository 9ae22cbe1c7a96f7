"""The queries users get: every panel expression of the chart's dashboards and every alert of
its rule file, read from the files the chart ships (charts/mqstore/files/), with Grafana's
variables substituted as the contract says ($namespace, $broker, $__rate_interval)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
FILES = ROOT / "charts" / "mqstore" / "files"
DASHBOARDS = FILES / "dashboards"
RULES = FILES / "rules" / "mqstore-alerts.yaml"
RULE_TESTS = FILES / "rules" / "tests"
RATE_INTERVAL = "15s"
"""`$__rate_interval` at a 1 s scrape: Grafana's floor is 4 scrape intervals; 15 s is more."""
LABEL_VALUES = re.compile(r"^label_values\((?:(?P<match>.+),\s*)?(?P<label>\w+)\)$")


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    unit: str
    legend: str
    expr: str
    """With the variables substituted."""


def dashboard_paths() -> list[Path]:
    paths = sorted(DASHBOARDS.glob("*.json"))
    assert paths, f"no dashboards in {DASHBOARDS}"
    return paths


def load_dashboard(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def panels(panel_list: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included, in order."""
    for panel in panel_list:
        yield panel
        yield from panels(panel.get("panels", []))


def substitute(expr: str, *, namespace: str, broker: str,
               rate_interval: str = RATE_INTERVAL) -> str:
    return (expr.replace("$__rate_interval", rate_interval)
            .replace("$namespace", namespace).replace("$broker", broker))


def panel_queries(dashboard: dict[str, Any], *, namespace: str, broker: str,
                  rate_interval: str = RATE_INTERVAL) -> list[PanelQuery]:
    found = []
    for panel in panels(dashboard["panels"]):
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        for target in panel.get("targets", []):
            if "expr" not in target:
                continue
            found.append(PanelQuery(
                dashboard=dashboard["uid"], panel=panel.get("title", ""), unit=unit,
                legend=target.get("legendFormat", ""),
                expr=substitute(target["expr"], namespace=namespace, broker=broker,
                                rate_interval=rate_interval)))
    return found


def variable_queries(dashboard: dict[str, Any], *, namespace: str,
                     broker: str) -> list[tuple[str, str | None, str]]:
    """The `label_values(match, label)` of each query variable: (name, match, label), the
    match with earlier variables substituted (Grafana's own function, not PromQL: the test
    asks Prometheus' label values API the same question)."""
    found = []
    for variable in dashboard["templating"]["list"]:
        if variable.get("type") != "query":
            continue
        query = variable["query"]
        text = query["query"] if isinstance(query, dict) else query
        parsed = LABEL_VALUES.match(text.strip())
        assert parsed, f"{dashboard['uid']} variable {variable['name']}: {text!r} is not " \
                       f"label_values(...)"
        match = parsed["match"]
        if match is not None:
            match = substitute(match, namespace=namespace, broker=broker)
        found.append((variable["name"], match, parsed["label"]))
    return found


def alert_rules(path: Path = RULES) -> list[dict[str, Any]]:
    document = yaml.safe_load(path.read_text())
    rules = [rule for group in document["groups"] for rule in group["rules"]
             if "alert" in rule]
    assert rules, f"no alerts in {path}"
    return rules


def write_rules_without_for(target: Path, source: Path = RULES) -> Path:
    """A copy of the rule file with every `for:` at 0 s: an alert fires on the first
    evaluation that sees its condition (the real durations are promtool's to test)."""
    document = yaml.safe_load(source.read_text())
    for group in document["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            if "alert" in rule:
                rule["for"] = "0s"
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target
