"""The documents the observability tests hold the code to: docs/metrics.md's reference table,
docs/alerts.md's runbook headings, the chart's dashboards and alert rule file."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[2]
METRICS_DOC = ROOT / "docs" / "metrics.md"
ALERTS_DOC = ROOT / "docs" / "alerts.md"
DASHBOARD_DIR = ROOT / "charts" / "mqstore" / "files" / "dashboards"
RULES_FILE = ROOT / "charts" / "mqstore" / "files" / "rules" / "mqstore-alerts.yaml"
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
METRIC_NAME = re.compile(r"\bmqstore_[a-z0-9_]+")


@dataclasses.dataclass(frozen=True)
class Documented:
    name: str
    type: str
    labels: frozenset[str]
    unit: str
    services: frozenset[str]
    meaning: str


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def documented_metrics() -> dict[str, Documented]:
    """The rows of the one reference table (the table whose header starts with Name)."""
    rows: dict[str, Documented] = {}
    in_table = False
    for line in METRICS_DOC.read_text().splitlines():
        if line.startswith("| Name |"):
            assert _cells(line) == ["Name", "Type", "Labels", "Unit", "Service", "Meaning"]
            in_table = True
            continue
        if not in_table or line.startswith("|---"):
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        name, kind, labels, unit, services, meaning = _cells(line)
        assert name.startswith("`") and name.endswith("`"), line
        name = name.strip("`")
        assert name not in rows, f"{name} is listed twice"
        label_set = frozenset(label.strip().strip("`") for label in labels.split(",")
                              if label.strip() not in ("—", ""))
        rows[name] = Documented(name, kind, label_set, unit,
                                frozenset(s.strip() for s in services.split(",")), meaning)
    assert rows, f"no reference table found in {METRICS_DOC}"
    return rows


def metric_families_in(expression: str, documented: dict[str, Documented]) -> set[str]:
    """The documented family each metric name in a PromQL expression belongs to; a name
    that is neither a family nor a histogram's series comes back as it is (and fails)."""
    found = set()
    for name in METRIC_NAME.findall(expression):
        base = name
        for suffix in HISTOGRAM_SUFFIXES:
            if name.endswith(suffix) and name.removesuffix(suffix) in documented and \
                    documented[name.removesuffix(suffix)].type == "histogram":
                base = name.removesuffix(suffix)
        found.add(base)
    return found


def dashboards() -> dict[str, dict[str, Any]]:
    return {path.name: json.loads(path.read_text())
            for path in sorted(DASHBOARD_DIR.glob("*.json"))}


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' nested panels included, rows themselves excluded."""
    found = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            found.extend(panel.get("panels", []))
        else:
            found.append(panel)
    return found


def alert_rules() -> list[dict[str, Any]]:
    loaded = yaml.safe_load(RULES_FILE.read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def github_anchor(heading: str) -> str:
    """The anchor GitHub (and most Markdown renderers) give a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def alerts_doc_anchors() -> list[str]:
    return [github_anchor(line.lstrip("#")) for line in ALERTS_DOC.read_text().splitlines()
            if line.startswith("### ")]
