"""The alert rule file: well formed, every alert with a severity, a runbook paragraph in
docs/alerts.md under the anchor its runbook_url names, and only documented metrics."""

from __future__ import annotations

from .reference import alert_rules, alerts_doc_anchors, documented_metrics, metric_families_in

SEVERITIES = {"warning", "critical"}
ISSUE_ALERTS = {
    "MqstoreDiskFillingUp", "MqstoreWritesRefused", "MqstoreFlushLagHigh",
    "MqstoreDispatchLagHigh", "MqstoreReplicationLagHigh", "MqstoreSyncMasterNoFollower",
    "MqstorePoolExhausted", "MqstorePullLatencyHigh", "MqstoreOperatorReconcileFailures"}
"""Issue 8's list: disk filling, writes refused, flush lag, dispatch lag, replication lag or no
follower under SYNC_MASTER, pool exhausted, pull latency, operator reconcile failures."""
RETRY_ALERTS = {"MqstoreDeadLettersGrowing"}
"""Retries and dead letters: messages that keep going to a DLQ."""
TRANSACTION_ALERTS = {"MqstoreDiscardedTransactionsGrowing"}
"""Transactions: halves that keep being discarded after their last check."""


def test_the_issue_alerts_are_all_there_once() -> None:
    names = [rule["alert"] for rule in alert_rules()]
    assert len(names) == len(set(names))
    assert set(names) == ISSUE_ALERTS | RETRY_ALERTS | TRANSACTION_ALERTS


def test_the_dead_letter_alert_watches_the_fronts_dead_letters_per_pod() -> None:
    """It fires on a growing count of dead letters (an increase over a window), per pod
    (a notifier's counter is its own), whatever the path that sent them there."""
    (rule,) = [rule for rule in alert_rules() if rule["alert"] in RETRY_ALERTS]
    documented = documented_metrics()
    assert metric_families_in(rule["expr"], documented) == {
        "mqstore_remoting_dead_letters_total"}
    assert "increase(mqstore_remoting_dead_letters_total[" in rule["expr"]
    assert "sum by (namespace, broker, pod)" in rule["expr"]
    assert "path" not in rule["expr"]


def test_the_discarded_transactions_alert_watches_the_checks_discards_per_pod() -> None:
    """It fires on a growing count of halves discarded after their last check, per pod,
    and on no other outcome of a check."""
    (rule,) = [rule for rule in alert_rules() if rule["alert"] in TRANSACTION_ALERTS]
    documented = documented_metrics()
    assert metric_families_in(rule["expr"], documented) == {
        "mqstore_remoting_transaction_checks_total"}
    assert 'increase(mqstore_remoting_transaction_checks_total{outcome="discarded"}[' in \
        rule["expr"]
    assert "sum by (namespace, broker, pod)" in rule["expr"]


def test_every_alert_is_complete() -> None:
    for rule in alert_rules():
        name = rule["alert"]
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, name
        assert rule["labels"]["severity"] in SEVERITIES, name
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}, name
        assert rule["annotations"]["runbook_url"] == f"docs/alerts.md#{name.lower()}"


def test_every_runbook_anchor_is_a_heading_of_docs_alerts() -> None:
    anchors = alerts_doc_anchors()
    assert len(anchors) == len(set(anchors))
    assert sorted(anchors) == sorted(rule["alert"].lower() for rule in alert_rules())


def test_only_documented_metrics_are_used() -> None:
    documented = documented_metrics()
    for rule in alert_rules():
        found = metric_families_in(rule["expr"], documented)
        assert found, rule["alert"]
        assert found <= set(documented), (rule["alert"], sorted(found - set(documented)))
