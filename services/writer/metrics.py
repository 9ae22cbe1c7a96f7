"""The writer's metrics: put counters and latency per request, store gauges at scrape time.

    mqstore_put_requests_total{endpoint, code}      requests answered, by route and HTTP code
    mqstore_put_messages_total{status}              messages by put status (no topic label:
                                                    topics are user data, unbounded)
    mqstore_put_latency_seconds{endpoint}           request handling time, histogram
    mqstore_put_requests_in_flight                  put requests being served (admission.py)
    mqstore_put_requests_refused_busy_total         refused past put_requests_in_flight_max
    mqstore_commitlog_position_bytes{watermark}     min, written, committed, flushed
    mqstore_commit_lag_bytes                        written - committed (pool only: 0 without)
    mqstore_flush_lag_bytes                         committed - flushed: lost on a machine crash
    mqstore_pool_buffers_free                       transient store pool (absent when off)
    mqstore_segments                                commit log segment files
    mqstore_log_bytes                               written - min: the retained log
    mqstore_disk_used_ratio                         of the volume, as retention measures it
    mqstore_volume_used_bytes                       used bytes of the volume's file system
    mqstore_volume_capacity_bytes                   used + available to the broker
    mqstore_dispatch_behind_bytes                   in-process dispatch only (absent when off)
    mqstore_store_failed                            1 once a failed sync stopped the store
    mqstore_segments_preallocated_total             segment files created at full size
    mqstore_preallocation_seconds_total             time spent creating them
    mqstore_flush_syncs_total                       segment syncs that moved the flushed mark
    mqstore_retention_deleted_segments_total        segments retention deleted
    mqstore_retention_deleted_bytes_total           their bytes
    mqstore_recoveries_total{mode}                  this open's recovery: 1 for its mode
                                                    (empty, normal, abnormal, full), 0 else
    mqstore_recovery_truncated_bytes_total          tail bytes that recovery cut off
    mqstore_recovery_damaged_ranges                 damaged ranges this open's recovery found
    mqstore_replication_*                           see replication_status.py
    mqstore_delay_messages_scheduled_total          produces moved to the schedule topic
                                                    (ProduceCore.delayed); the schedule's
                                                    own series: delay_metrics.py

The counters are the engine's own totals (storage/stats.py), read at scrape time; they count
since the process opened the store, so a restart resets them as Prometheus expects.

The writer reads its watermarks from the store itself; the `positions` file publishes the
same values for other processes (the indexer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiohttp import web
from prometheus_client import Counter, Histogram

from mqstore.services.common.observability.metrics import (
    CallbackMetrics,
    CounterSpec,
    GaugeSpec,
    GaugeValue,
    new_registry,
    timing_middleware,
)
from mqstore.services.writer.admission import Admission
from mqstore.services.writer.replication_follower import ReplicationClient
from mqstore.services.writer.replication_status import replication_gauges
from mqstore.storage import MessageStore, PutStatus, RecoveryMode
from mqstore.storage.log.retention import disk_usage_bytes, disk_used_ratio

LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                     0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""100 µs (a single put over loopback) to 10 s (past `sync_flush_timeout_ms`'s 5 s)."""


def store_gauges(store: MessageStore) -> list[GaugeSpec]:
    progress = store.replication.progress

    def positions() -> GaugeValue:
        values: dict[tuple[str, ...], float] = {
                  ("min",): store.min_position, ("written",): store.written_position,
                  ("committed",): store.committed_position,
                  ("flushed",): store.flushed_position}
        if progress is not None:  # a master: the highest position a follower confirmed
            values["replicated",] = progress.replicated_position
        return values

    def dispatch_behind() -> GaugeValue:
        return store.dispatch_behind_bytes if store.config.dispatch_enabled else None

    return [
        GaugeSpec("mqstore_commitlog_position_bytes", "Commit log watermarks (byte positions).",
                  positions, labels=("watermark",)),
        GaugeSpec("mqstore_commit_lag_bytes", "Written but not yet committed to the file.",
                  lambda: store.written_position - store.committed_position),
        GaugeSpec("mqstore_flush_lag_bytes", "Committed but not yet synced to disk.",
                  lambda: store.committed_position - store.flushed_position),
        GaugeSpec("mqstore_pool_buffers_free", "Free transient store pool buffers.",
                  lambda: store.pool_free_count),
        GaugeSpec("mqstore_segments", "Commit log segment files.", lambda: store.segment_count),
        GaugeSpec("mqstore_log_bytes", "Bytes of commit log retained (written - min position).",
                  lambda: store.written_position - store.min_position),
        GaugeSpec("mqstore_disk_used_ratio", "Used fraction of the store's volume.",
                  lambda: disk_used_ratio(store.directory)),
        GaugeSpec("mqstore_volume_used_bytes", "Used bytes of the store volume's file system.",
                  lambda: disk_usage_bytes(store.directory)[0]),
        GaugeSpec("mqstore_volume_capacity_bytes",
                  "Used bytes plus the bytes still available to the store.",
                  lambda: disk_usage_bytes(store.directory)[1]),
        GaugeSpec("mqstore_dispatch_behind_bytes", "Log bytes not yet in consume queues.",
                  dispatch_behind),
        GaugeSpec("mqstore_store_failed", "1 once the store stopped after a failed sync.",
                  lambda: float(store.failure is not None)),
    ]


def store_counters(store: MessageStore) -> list[GaugeSpec]:
    """The engine's running totals (one `stats` copy per scrape would do; each counter reads
    its own to keep the specs independent, the copy costs a few attribute reads)."""

    def recoveries() -> GaugeValue:
        mode = store.stats.recovery_mode
        return {(each.value,): float(each is mode) for each in RecoveryMode}

    return [
        CounterSpec("mqstore_segments_preallocated_total",
                    "Commit log segment files created at full size.",
                    lambda: store.stats.segments_preallocated_total),
        CounterSpec("mqstore_preallocation_seconds_total",
                    "Time spent creating segment files (file, mapping, warm-up).",
                    lambda: store.stats.preallocation_seconds_total),
        CounterSpec("mqstore_flush_syncs_total",
                    "Commit log segment syncs that moved the flushed position.",
                    lambda: store.stats.flush_syncs_total),
        CounterSpec("mqstore_retention_deleted_segments_total",
                    "Commit log segments deleted by retention.",
                    lambda: store.stats.retention_deleted_segments_total),
        CounterSpec("mqstore_retention_deleted_bytes_total",
                    "Commit log bytes deleted by retention.",
                    lambda: store.stats.retention_deleted_bytes_total),
        CounterSpec("mqstore_recoveries_total",
                    "Recoveries at open, by mode (1 for this process's open).", recoveries,
                    labels=("mode",)),
        CounterSpec("mqstore_recovery_truncated_bytes_total",
                    "Commit log tail bytes recovery cut off at open.",
                    lambda: store.stats.recovery_truncated_bytes),
        GaugeSpec("mqstore_recovery_damaged_ranges",
                  "Damaged ranges of the commit log this open's recovery found (kept, not "
                  "cut; reads answer MESSAGE_CORRUPT there).",
                  lambda: len(store.recovery_report.damage)),
    ]


def admission_metrics(admission: Admission) -> list[GaugeSpec]:
    return [
        GaugeSpec("mqstore_put_requests_in_flight", "Put requests being served right now.",
                  lambda: admission.in_flight),
        CounterSpec("mqstore_put_requests_refused_busy_total",
                    "Put requests refused with 503 SYSTEM_BUSY: put_requests_in_flight_max "
                    "were in flight.", lambda: admission.refused_total),
    ]


class WriterMetrics:
    """Owns the app's registry; the middleware times and counts the put routes."""

    def __init__(self, store: MessageStore, admission: Admission, *,
                 follower: ReplicationClient | None = None) -> None:
        self.registry = new_registry([*store_gauges(store), *store_counters(store),
                                      *admission_metrics(admission),
                                      *replication_gauges(store, follower)])
        self.put_requests = Counter("mqstore_put_requests_total",
                                    "Put requests answered, by route and HTTP code.",
                                    ["endpoint", "code"], registry=self.registry)
        self.put_messages = Counter("mqstore_put_messages_total",
                                    "Messages by put status.", ["status"],
                                    registry=self.registry)
        self.put_latency = Histogram("mqstore_put_latency_seconds",
                                     "Put request handling time.", ["endpoint"],
                                     buckets=LATENCY_BUCKETS_S, registry=self.registry)
        acknowledger = store.replication.acknowledger
        if acknowledger is not None:  # a sync master
            acknowledger.observe_latency = Histogram(
                "mqstore_replication_sync_ack_latency_seconds",
                "From a sync-master append to a follower's confirmation of it.",
                buckets=LATENCY_BUCKETS_S, registry=self.registry).observe
        self.delay_scheduled = Counter(
            "mqstore_delay_messages_scheduled_total",
            "Produces asking for a delay level, moved to the schedule topic to wait "
            "(counted before their put).", registry=self.registry)
        # Label children resolved once: `.labels()` costs a lock and a dict lookup.
        self._messages_by_status = {status: self.put_messages.labels(status=status.value)
                                    for status in PutStatus}

    def count_messages(self, status: PutStatus, count: int) -> None:
        self._messages_by_status[status].inc(count)

    def add(self, specs: Sequence[GaugeSpec]) -> None:
        """Serve the series of a part made after the app (the delay schedule: run.py)."""
        self.registry.register(CallbackMetrics(specs))

    def middleware(self, endpoints: frozenset[str]) -> Any:
        """Time and count requests to the routes named in `endpoints` (the put routes)."""
        requests, latency = self.put_requests, self.put_latency

        def observe(name: str, seconds: float, request: web.Request,
                    response: web.StreamResponse) -> None:
            latency.labels(endpoint=name).observe(seconds)
            requests.labels(endpoint=name, code=str(response.status)).inc()

        return timing_middleware(endpoints, observe)
