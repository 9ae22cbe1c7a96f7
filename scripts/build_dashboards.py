"""Write the chart's Grafana dashboards (charts/mqstore/files/dashboards/*.json) from the
panel lists below.

The JSON files are what the chart ships and what the tests read; this script is how they are
made, so that 60 panels share one layout, one datasource and one selector without copy
mistakes.  Run it after changing a panel and commit both:

    .venv/bin/python scripts/build_dashboards.py

Output is deterministic (panel ids and grid positions follow the order below), so a rerun
without changes leaves the files byte-identical; a test checks that.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT_DIR = Path(__file__).parents[1] / "charts" / "mqstore" / "files" / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
WIDTH, HEIGHT, COLUMNS = 12, 8, 2
SCHEMA_VERSION = 39
RATE = "[$__rate_interval]"

Target = tuple[str, str]
"""(PromQL expression, legend)."""


def sel(extra: str = "") -> str:
    """The broker selector of every service expression, plus `extra` matchers."""
    base = 'namespace="$namespace", broker="$broker"'
    return "{" + base + (", " + extra if extra else "") + "}"


def op_sel(extra: str = "") -> str:
    """The operator's selector: its series carry no broker label."""
    return "{" + 'namespace="$namespace"' + (", " + extra if extra else "") + "}"


def quantiles(metric: str, matchers: str, by: str, *, qs: tuple[float, ...] = (0.5, 0.99)
              ) -> list[Target]:
    by_le = f"{by}, le" if by else "le"
    legend_by = f"{{{{{by}}}}} " if by and "," not in by else ""
    return [(f"histogram_quantile({q}, sum by ({by_le}) "
             f"(rate({metric}_bucket{matchers}{RATE})))", f"{legend_by}p{round(q * 100)}")
            for q in qs]


def panel(title: str, unit: str, targets: list[Target], *, description: str,
          kind: str = "timeseries") -> dict[str, Any]:
    return {"type": kind, "title": title, "description": description,
            "datasource": DATASOURCE,
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"datasource": DATASOURCE, "expr": expr, "legendFormat": legend,
                         "refId": chr(ord("A") + index)}
                        for index, (expr, legend) in enumerate(targets)]}


def row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def layout(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows span the width; panels fill two columns below their row."""
    y, column, panels = 0, 0, []
    for panel_id, item in enumerate(items, start=1):
        if item["type"] == "row":
            if column:
                y, column = y + HEIGHT, 0
            grid = {"h": 1, "w": 24, "x": 0, "y": y}
            y += 1
        else:
            grid = {"h": HEIGHT, "w": WIDTH, "x": column * WIDTH, "y": y}
            column = (column + 1) % COLUMNS
            if not column:
                y += HEIGHT
        panels.append({**item, "id": panel_id, "gridPos": grid})
    return panels


def variables(*, namespace_metric: str, broker: bool) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [{
        "name": "datasource", "label": "Data source", "type": "datasource",
        "query": "prometheus", "current": {}, "hide": 0, "refresh": 1, "regex": ""}]

    def query(name: str, label: str, definition: str) -> dict[str, Any]:
        return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
                "query": definition, "definition": definition, "current": {}, "hide": 0,
                "refresh": 2, "sort": 1, "multi": False, "includeAll": False, "regex": ""}

    found.append(query("namespace", "Namespace",
                       f"label_values({namespace_metric}, namespace)"))
    if broker:
        found.append(query("broker", "Broker",
                           f'label_values({namespace_metric}{{namespace="$namespace"}}, '
                           'broker)'))
    return found


def dashboard(uid: str, title: str, description: str, items: list[dict[str, Any]], *,
              namespace_metric: str, broker: bool = True) -> dict[str, Any]:
    return {"uid": uid, "title": title, "description": description,
            "tags": ["mqstore"], "editable": True, "graphTooltip": 1,
            "schemaVersion": SCHEMA_VERSION, "version": 1, "refresh": "30s",
            "time": {"from": "now-3h", "to": "now"}, "timezone": "browser",
            "templating": {"list": variables(namespace_metric=namespace_metric,
                                             broker=broker)},
            "annotations": {"list": []}, "links": [],
            "panels": layout(items)}


def _overview_rate_and_disk() -> list[dict[str, Any]]:
    """Traffic, durability and disk rows."""
    s, written = sel(), sel('watermark="written"')
    return [
        row("Traffic"),
        panel("Produce rate", "ops", [
            (f"sum by (status) (rate(mqstore_put_messages_total{s}{RATE}))", "{{status}}")],
            description="Messages stored or refused per second, by put status."),
        panel("Pull rate", "reqps", [
            (f"sum by (status) (rate(mqstore_pull_requests_total{s}{RATE}))", "{{status}}")],
            description="Pulls and group polls answered per second, by final status."),
        panel("Put latency", "s",
              quantiles("mqstore_put_latency_seconds", s, ""),
              description="Put request handling time at the writer (p50, p99)."),
        panel("Pull latency (answered without waiting)", "s",
              quantiles("mqstore_pull_latency_seconds", sel('held="false"'), ""),
              description="Pulls that did not wait for data (p50, p99); long polls that "
                          "waited are excluded, their time is the producer's pace."),
        row("Durability"),
        panel("Commit and flush lag", "bytes", [
            (f"max by (pod) (mqstore_commit_lag_bytes{s})", "commit {{pod}}"),
            (f"max by (pod) (mqstore_flush_lag_bytes{s})", "flush {{pod}}")],
            description="Written but not committed (pool only), and committed but not "
                        "synced to disk (lost on a machine crash)."),
        panel("Pool buffers free", "short", [
            (f"min by (pod) (mqstore_pool_buffers_free{s})", "{{pod}}")],
            description="Free transient store pool buffers; absent when the pool is off. "
                        "At 0 the next segment waits for a buffer."),
        panel("Commit log write rate", "Bps", [
            (f"max by (pod) (deriv(mqstore_commitlog_position_bytes{written}{RATE}))", "{{pod}}")],
            description="Bytes appended to the commit log per second (the slope of the "
                        "written position)."),
        panel("Writer store failed", "bool", [
            (f"max by (pod) (mqstore_store_failed{s})", "{{pod}}")],
            description="1 once a failed sync stopped the store (writes refused until "
                        "restart).", kind="stat"),
        row("Disk"),
        panel("Volume used", "bytes", [
            (f"max by (pod) (mqstore_volume_used_bytes{s})", "used {{pod}}"),
            (f"max by (pod) (mqstore_volume_capacity_bytes{s})", "capacity {{pod}}")],
            description="Bytes used on the broker's volume and its capacity (as "
                        "retention measures them: used + available to the broker)."),
        panel("Time to full", "s", [
            (f"max by (pod) ((mqstore_volume_capacity_bytes{s} - mqstore_volume_used_bytes{s})"
             f" / (deriv(mqstore_volume_used_bytes{s}[1h]) > 0))", "{{pod}}")],
            description="Free bytes divided by the growth rate over the last hour; no "
                        "value while usage is flat or shrinking."),
    ]


def _overview_flow() -> list[dict[str, Any]]:
    """Dispatch, replication and error rows."""
    s, committed = sel(), sel('watermark="committed"')
    indexer = sel('container="indexer"')
    refused, http_failed = sel('status!="PUT_OK"'), sel('status=~"HTTP_.*"')
    return [
        row("Dispatch and pulls"),
        panel("Dispatch lag", "bytes", [
            (f"max by (pod) (mqstore_dispatch_behind_bytes{indexer})", "indexer {{pod}}"),
            (f"max by (pod) (mqstore_commitlog_position_bytes{committed})"
             f" - max by (pod) (mqstore_notifier_dispatched_position_bytes{s})",
             "published {{pod}}")],
            description="Committed log bytes not yet in consume queues: the indexer's own "
                        "figure, and the writer's committed position minus the dispatch "
                        "position the indexer published (seen by the notifier; still "
                        "right when the indexer is stuck)."),
        panel("Held pulls", "short", [
            (f"sum by (pod) (mqstore_pull_held_requests{s})", "{{pod}}")],
            description="Long-polling pulls waiting for data right now."),
        panel("Pull wakeups", "ops", [
            (f"sum by (cause) (rate(mqstore_pull_wakeups_total{s}{RATE}))", "{{cause}}")],
            description="Held pulls woken per second: by a notice, the refresh pass, the "
                        "end of their wait, or shutdown."),
        panel("Notice stream", "short", [
            (f"sum by (pod) (mqstore_notice_stream_connected{s})", "notifiers connected {{pod}}"),
            (f"sum by (pod) (mqstore_notice_subscribers{s})", "subscribers {{pod}}")],
            description="Notifiers connected to the indexer's notice stream."),
        row("Replication"),
        panel("Replication lag", "bytes", [
            (f"max by (pod, follower) (mqstore_replication_lag_bytes{s})",
             "master {{pod}} → {{follower}}"),
            (f"max by (pod) (mqstore_replication_master_lag_bytes{s})", "follower {{pod}}")],
            description="Bytes the master has that a follower has not confirmed (master "
                        "side), and a follower's own view of how far behind it is."),
        panel("Followers and role", "short", [
            (f"max by (pod) (mqstore_replication_followers{s})", "followers {{pod}}"),
            (f"max by (pod, role) (mqstore_replication_role{s} == 1)", "{{role}} {{pod}}")],
            description="Connected followers per master, and each writer's role."),
        panel("Sync-master acknowledgement latency", "s",
              quantiles("mqstore_replication_sync_ack_latency_seconds", s, ""),
              description="From a sync-master append to a follower's confirmation (p50, "
                          "p99)."),
        row("Errors"),
        panel("Puts not stored as asked", "ops", [
            (f"sum by (status) (rate(mqstore_put_messages_total"
             f"{refused}{RATE}))", "{{status}}")],
            description="Messages refused or stored without the durability asked for, by "
                        "put status."),
        panel("Requests by HTTP code", "reqps", [
            (f"sum by (code) (rate(mqstore_put_requests_total{s}{RATE}))", "put {{code}}"),
            (f"sum by (status) (rate(mqstore_pull_requests_total"
             f"{http_failed}{RATE}))", "pull {{status}}")],
            description="Put requests by HTTP code; pulls that failed before a get status "
                        "(HTTP_<code>)."),
    ]


def _overview_retries() -> list[dict[str, Any]]:
    """Consumers' send-backs, dead letters and the delay schedule (docs/remoting.md)."""
    s = sel()
    return [
        row("Retries, dead letters and delays"),
        panel("Send-backs and nacks", "reqps", [
            (f"sum by (outcome) (rate(mqstore_remoting_send_backs_total{s}{RATE}))",
             "{{outcome}}"),
            (f"sum by (outcome) (rate(mqstore_nacks_total{s}{RATE}))", "nack {{outcome}}")],
            description="Consumers' failed messages per second, sent back (remoting code "
                        "36) or nacked over HTTP: stored for a retry, stored as a dead "
                        "letter, or refused (a RocketMQ client then sends the message to its "
                        "retry topic itself; an HTTP consumer nacks again)."),
        panel("Dead-lettered messages", "short", [
            (f"sum by (path) (increase(mqstore_remoting_dead_letters_total{s}{RATE}))",
             "{{path}}")],
            description="Messages moved to a %DLQ% topic per interval: by a send-back or a "
                        "nack past the max reconsume times, or a client's own retry send past "
                        "it. "
                        "They are never delivered again: mqstore admin retries lists them."),
        panel("Delayed messages", "ops", [
            (f"sum (rate(mqstore_delay_messages_scheduled_total{s}{RATE}))", "scheduled"),
            (f"sum (rate(mqstore_delay_messages_delivered_total{s}{RATE}))", "delivered"),
            (f"sum (rate(mqstore_delay_messages_skipped_total{s}{RATE}))", "skipped")],
            description="Messages per second moved into the schedule topic (delay levels "
                        "and retries), put back into their topic when due, and skipped as "
                        "undeliverable (the writer logs each)."),
        panel("Delayed messages waiting", "short", [
            (f"sum by (level) (mqstore_delay_messages_waiting{s})", "level {{level}}")],
            description="Messages in the schedule topic not yet due, per delay level; a "
                        "level that only grows is not being delivered."),
    ]


def _overview_transactions() -> list[dict[str, Any]]:
    """Transactions' ends, the check service and its half messages (docs/remoting.md)."""
    s, ends = sel(), "mqstore_remoting_transaction_ends_total"
    producers, answers = sel('from_check="false"'), sel('from_check="true"')
    return [
        row("Transactions"),
        panel("Transaction ends", "reqps", [
            (f"sum by (outcome) (rate({ends}{producers}{RATE}))", "{{outcome}}"),
            (f"sum by (outcome) (rate({ends}{answers}{RATE}))", "{{outcome}} (check answer)")],
            description="END_TRANSACTION (remoting code 37) per second, by outcome: from "
                        "producers after their local transaction, and as answers to checks. "
                        "refused: no such half, or a mismatch (never seen by the producer)."),
        panel("Transaction checks", "ops", [
            (f"sum by (outcome) (rate(mqstore_remoting_transaction_checks_total{s}{RATE}))",
             "{{outcome}}")],
            description="Halves the check service took up per second: asked (a check sent "
                        "to a live producer), unasked (none online), discarded (checked too "
                        "often, moved to TRANS_CHECK_MAX_TIME_TOPIC and never delivered)."),
        panel("Half messages waiting", "short", [
            (f"max by (pod) (mqstore_remoting_transaction_half_messages_waiting{s})",
             "{{pod}}")],
            description="Half messages no op ended, as the check service's last pass counted "
                        "them (young transactions included): mqstore admin transactions "
                        "shows the topics and the check's progress."),
        panel("Check pass age", "s", [
            (f"time() - max by (pod) "
             f"(mqstore_remoting_transaction_check_pass_timestamp_seconds{s})", "{{pod}}")],
            description="Seconds since the check service's last pass ended: how stale "
                        "Half messages waiting is (a pass every transaction_check_interval_ms)."),
    ]


def overview() -> dict[str, Any]:
    items = [*_overview_rate_and_disk(), *_overview_flow(), *_overview_retries(),
             *_overview_transactions()]
    return dashboard("mqstore-overview", "mqstore / Broker overview",
                     "Produce and pull rates, latency, durability lags, disk, dispatch, "
                     "replication, errors, retries, delays and transactions of one "
                     "broker.", items,
                     namespace_metric="mqstore_segments")


def storage() -> dict[str, Any]:
    s = sel()
    items = [
        row("Commit log"),
        panel("Segments", "short", [(f"max by (pod) (mqstore_segments{s})", "{{pod}}")],
              description="Commit log segment files on the volume."),
        panel("Retained log", "bytes", [(f"max by (pod) (mqstore_log_bytes{s})", "{{pod}}")],
              description="Bytes between the log's minimum and written positions."),
        panel("Watermarks", "bytes", [
            (f"max by (pod, watermark) (mqstore_commitlog_position_bytes{s})",
             "{{watermark}} {{pod}}")],
            description="Commit log positions: min, written, committed, flushed, "
                        "replicated."),
        panel("Disk syncs", "ops", [
            (f"sum by (pod) (rate(mqstore_flush_syncs_total{s}{RATE}))", "{{pod}}")],
            description="fsyncs of the commit log per second (flush service and group "
                        "commit)."),
        row("Preallocation"),
        panel("Segments preallocated", "ops", [
            (f"sum by (pod) (rate(mqstore_segments_preallocated_total{s}{RATE}))", "{{pod}}")],
            description="New segment files created at full size per second."),
        panel("Mean preallocation time", "s", [
            (f"sum by (pod) (rate(mqstore_preallocation_seconds_total{s}{RATE}))"
             f" / sum by (pod) (rate(mqstore_segments_preallocated_total{s}{RATE}))",
             "{{pod}}")],
            description="Seconds spent creating one segment file, on average."),
        row("Recovery"),
        panel("Recoveries", "short", [
            (f"sum by (pod, mode) (mqstore_recoveries_total{s})", "{{mode}} {{pod}}")],
            description="Startup recoveries since the writer started: normal (clean "
                        "shutdown) or abnormal (the abort marker was present)."),
        panel("Bytes truncated by recovery", "bytes", [
            (f"sum by (pod) (mqstore_recovery_truncated_bytes_total{s})", "{{pod}}")],
            description="Torn or unsynced tail bytes recovery cut off at startup."),
        row("Retention"),
        panel("Segments deleted", "short", [
            (f"sum by (pod) (increase(mqstore_retention_deleted_segments_total{s}{RATE}))",
             "{{pod}}")],
            description="Commit log segments retention deleted, per interval."),
        panel("Bytes deleted", "bytes", [
            (f"sum by (pod) (increase(mqstore_retention_deleted_bytes_total{s}{RATE}))",
             "{{pod}}")],
            description="Commit log bytes retention deleted, per interval."),
        panel("Disk used ratio", "percentunit", [
            (f"max by (pod) (mqstore_disk_used_ratio{s})", "{{pod}}")],
            description="Used fraction of the volume; writes are refused above "
                        "disk_warning_ratio (0.90 by default)."),
        panel("Volume free", "bytes", [
            (f"max by (pod) (mqstore_volume_capacity_bytes{s} - mqstore_volume_used_bytes{s})",
             "{{pod}}")],
            description="Bytes still available to the broker on its volume."),
        row("Consume queues"),
        panel("Consume queues", "short", [
            (f"max by (pod) (mqstore_consume_queues{s})", "{{pod}}")],
            description="Consume queues (topic, queue id) in the store."),
        panel("Dispatch positions", "bytes", [
            (f"max by (pod) (mqstore_dispatch_position_bytes{s})", "dispatched {{pod}}"),
            (f"max by (pod) (mqstore_dispatch_synced_position_bytes{s})", "synced {{pod}}")],
            description="Commit log position dispatch reached, and below which consume "
                        "queues are synced to disk."),
    ]
    return dashboard("mqstore-storage", "mqstore / Storage", "Segments, preallocation, "
                     "recovery and retention of one broker's volume.", items,
                     namespace_metric="mqstore_segments")


def operator() -> dict[str, Any]:
    s = op_sel()
    items = [
        row("Reconciles"),
        panel("Reconcile passes", "ops", [
            (f"sum by (trigger, result) (rate(mqstore_operator_reconciles_total{s}{RATE}))",
             "{{trigger}} {{result}}")],
            description="Reconcile passes over Brokers per second, by trigger and result."),
        panel("Reconcile failures", "ops", [
            (f"sum by (error) (rate(mqstore_operator_reconcile_failures_total{s}{RATE}))",
             "{{error}}")],
            description="Passes that raised, by exception type (kopf retries each)."),
        panel("Reconcile duration", "s",
              quantiles("mqstore_operator_reconcile_duration_seconds", s, "trigger"),
              description="Wall time of one pass, API calls included (p50, p99)."),
        panel("Events posted", "ops", [
            (f"sum by (reason) (rate(mqstore_operator_events_total{s}{RATE}))", "{{reason}}")],
            description="Kubernetes Events the operator posted per second, by reason."),
    ]
    return dashboard("mqstore-operator", "mqstore / Operator", "Reconcile passes, failures "
                     "and durations of the mqstore operator.", items,
                     namespace_metric="mqstore_operator_reconciles_total", broker=False)


DASHBOARDS = {"mqstore-overview.json": overview, "mqstore-storage.json": storage,
              "mqstore-operator.json": operator}


def render(name: str) -> str:
    return json.dumps(DASHBOARDS[name](), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name in DASHBOARDS:
        (OUT_DIR / name).write_text(render(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
