"""docs/metrics.md's table is what the services really expose, and the other way round.

The services run in-process (tests/observability/exposition.py) and their /metrics text is
parsed as Prometheus would; the operator's registry is read directly."""

from __future__ import annotations

import asyncio
import re

import pytest

from mqstore.operator import metrics as operator_metrics

from .exposition import (
    Family,
    merge,
    operator_families,
    remoting_families,
    split_families,
    writer_families,
)
from .reference import (
    Documented,
    alert_rules,
    dashboards,
    documented_metrics,
    metric_families_in,
    panels,
)

UNIT_SUFFIXES = {"_bytes": "bytes", "_seconds": "seconds", "_ratio": "ratio"}
NAME = re.compile(r"^mqstore_[a-z][a-z0-9_]*[a-z0-9]$")


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Family]:
    directory = tmp_path_factory.mktemp("exposition")

    async def gather() -> dict[str, Family]:
        found: dict[str, Family] = {}
        merge(found, await writer_families(directory / "writer"))
        merge(found, await split_families(directory / "split"))
        merge(found, await remoting_families(directory / "remoting"))
        return found

    found = asyncio.run(gather())
    merge(found, operator_families())
    return found


@pytest.fixture(scope="module")
def documented() -> dict[str, Documented]:
    return documented_metrics()


def test_every_exposed_family_is_documented_and_every_documented_one_exposed(
        exposed: dict[str, Family], documented: dict[str, Documented]) -> None:
    assert sorted(set(exposed) - set(documented)) == [], "exposed but not in docs/metrics.md"
    assert sorted(set(documented) - set(exposed)) == [], "documented but never exposed"


def test_every_dashboard_and_alert_expression_names_an_exposed_family(
        exposed: dict[str, Family], documented: dict[str, Documented]) -> None:
    """Straight against what the services serve, not only the table: a panel or an alert on
    a series nothing exports would show nothing, or never fire."""
    expressions = [(f"{name} / {panel['title']}", target["expr"])
                   for name, board in dashboards().items() for panel in panels(board)
                   for target in panel["targets"]]
    expressions += [(rule["alert"], rule["expr"]) for rule in alert_rules()]
    for where, expression in expressions:
        families = metric_families_in(expression, documented)
        assert families, where
        assert families <= set(exposed), (where, sorted(families - set(exposed)))


def test_types_and_services_match(exposed: dict[str, Family],
                                  documented: dict[str, Documented]) -> None:
    for name, row in documented.items():
        assert exposed[name].type == row.type, name
        assert exposed[name].services == set(row.services), name


def test_labels_match(exposed: dict[str, Family], documented: dict[str, Documented]) -> None:
    """Label names seen on samples equal the documented ones; the operator's metrics have no
    sample before a reconcile, so their declared label names are compared instead."""
    declared = {metric._name + ("_total" if metric._type == "counter" else ""):
                set(metric._labelnames)
                for metric in (operator_metrics.RECONCILES, operator_metrics.FAILURES,
                               operator_metrics.DURATION, operator_metrics.EVENTS)}
    for name, row in documented.items():
        labels = declared.get(name, exposed[name].labels)
        assert labels == set(row.labels), name


def test_names_follow_prometheus_conventions(documented: dict[str, Documented]) -> None:
    for name, row in documented.items():
        assert NAME.match(name), name
        assert (row.type == "counter") == name.endswith("_total"), name
        for suffix, unit in UNIT_SUFFIXES.items():
            if name.removesuffix("_total").endswith(suffix):
                assert row.unit == unit, f"{name} is in {unit}, the table says {row.unit}"
        if row.unit in ("bytes", "seconds"):
            assert name.removesuffix("_total").endswith(f"_{row.unit}"), \
                f"{name} is in {row.unit}: the name must end in _{row.unit}"
        assert row.meaning.endswith("."), name

