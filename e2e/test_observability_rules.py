"""The chart's alert rule file under promtool: it checks (syntax, PromQL, templates), and
its unit tests (charts/mqstore/files/rules/tests/) pass: each alert quiet on healthy series,
not firing before its `for:`, firing after it with the labels and annotations users see."""

from __future__ import annotations

from pathlib import Path

import yaml

from .obs_queries import RULE_TESTS, RULES, alert_rules
from .prometheus import promtool


def _test_files() -> list[Path]:
    files = sorted(RULE_TESTS.glob("*.yaml"))
    assert files, f"no promtool tests in {RULE_TESTS}"
    return files


def test_the_rule_file_passes_promtool_check() -> None:
    done = promtool("check", "rules", str(RULES))
    assert f"SUCCESS: {len(alert_rules())} rules found" in done.stdout, done.stdout


def test_the_rule_unit_tests_pass() -> None:
    done = promtool("test", "rules", *map(str, _test_files()))
    assert "SUCCESS" in done.stdout, done.stdout


def test_every_alert_is_unit_tested_quiet_and_firing() -> None:
    """Each alert has a test where it must not fire (before `for:`, healthy series) and one
    where it must."""
    quiet: set[str] = set()
    firing: set[str] = set()
    for path in _test_files():
        document = yaml.safe_load(path.read_text())
        for test in document["tests"]:
            for case in test.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert names - quiet == set(), f"never tested quiet: {names - quiet}"
    assert names - firing == set(), f"never tested firing: {names - firing}"
