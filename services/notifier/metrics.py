"""The notifier's metrics: pulls by status and their latency, held pulls, notices, wakeups.

    mqstore_pull_requests_total{endpoint, status}   pulls and polls answered: the get status
                                                    (FOUND, OFFSET_OVERFLOW_ONE, ...; a group
                                                    poll: FOUND or EMPTY), or HTTP_<code>
    mqstore_pull_latency_seconds{endpoint, held}    request time, holds included, histogram;
                                                    held="true" if the pull waited for data
    mqstore_pull_held_requests                      pulls waiting right now
    mqstore_pull_wakeups_total{cause}               held pulls woken: notice, refresh,
                                                    timeout, shutdown
    mqstore_notices_received_total{type}            stream lines: snapshot, advanced,
                                                    heartbeat
    mqstore_notice_stream_connected                 1 while the indexer's stream is open
    mqstore_notifier_queues                         consume queues the view knows
    mqstore_notifier_committed_position_bytes             committed end the writer published
    mqstore_notifier_dispatched_position_bytes      the indexer's published dispatch position
    mqstore_remoting_send_backs_total{outcome}      with the remoting front: send-backs (36)
                                                    answered: retry, dead_letter, refused
    mqstore_remoting_dead_letters_total{path}       messages sent to a %DLQ% topic: by a
                                                    send_back, a client's own retry_send
                                                    past its max, or a nack
                                                    (remoting/retry_counts.py)
    mqstore_nacks_total{outcome}                    HTTP nacks (nacks.py)
    mqstore_remoting_transaction_*                  with the remoting front: transactions'
                                                    ends, checks, halves waiting
                                                    (remoting/transaction_counts.py)
    mqstore_remoting_namesrv_registrations_total    with remoting.namesrv_addresses: the
      {namesrv, outcome}                            front's REGISTER_BROKER calls by name
                                                    server and outcome (remoting/registrar.py)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web
from prometheus_client import Counter, Histogram

from mqstore.services.common.observability.metrics import (
    CounterSpec,
    GaugeSpec,
    GaugeValue,
    new_registry,
    timing_middleware,
)
from mqstore.services.notifier.held import CAUSES, HeldPulls
from mqstore.services.notifier.remoting.retry_counts import RetryCounts
from mqstore.services.notifier.remoting.transaction_counts import CheckPass, TransactionCounts
from mqstore.storage.reads.store_view import StoreView

LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                     2.5, 5.0, 10.0, 15.0, 30.0, 60.0)
"""500 µs (an answer from memory) to past `pull_wait_ms_max` (a pull held to its end)."""
NOTICE_TYPES = ("snapshot", "advanced", "heartbeat")
STATUS_KEY = web.RequestKey("pull_status", str)
"""Where a pull handler leaves the status the middleware counts."""
HELD_KEY = web.RequestKey("pull_held", bool)
"""Set once a pull waited: its latency is then the producers' pace, not the notifier's."""


def held_marker(request: web.Request) -> Callable[[], None]:
    """What a pull calls when it starts waiting: marks `request` as held for the metrics."""
    def mark() -> None:
        request[HELD_KEY] = True

    return mark


def retry_metrics(counts: RetryCounts) -> list[GaugeSpec]:
    """Send-backs, HTTP nacks and dead letters (remoting/retry_counts.py)."""
    def by_label(totals: dict[str, int]) -> Callable[[], GaugeValue]:
        return lambda: {(label,): float(total) for label, total in totals.items()}

    return [
        CounterSpec("mqstore_remoting_send_backs_total",
                    "Consumers' send-backs of failed messages (CONSUMER_SEND_MSG_BACK) "
                    "answered, by outcome: retry, dead_letter, refused.",
                    by_label(counts.send_backs), labels=("outcome",)),
        CounterSpec("mqstore_remoting_dead_letters_total",
                    "Messages sent to a dead letter queue (%DLQ%<group>), by path: "
                    "send_back, a client's own retry_send past its max, or an HTTP nack.",
                    by_label(counts.dead_letters), labels=("path",)),
        CounterSpec("mqstore_nacks_total",
                    "HTTP nacks of consumers' failed messages (POST /v1/groups/{group}/nacks) "
                    "answered, by outcome: retry, dead_letter, refused.",
                    by_label(counts.nacks), labels=("outcome",)),
    ]


def transaction_metrics(counts: TransactionCounts) -> list[GaugeSpec]:
    """The remoting front's transactions (remoting/transaction_counts.py), registered with
    GET /v1/transactions (transaction_status.py); the last pass's gauges are absent until a
    pass has ended."""
    def last_pass(read: Callable[[CheckPass], float]) -> Callable[[], GaugeValue]:
        return lambda: None if counts.last_pass is None else read(counts.last_pass)

    return [
        CounterSpec("mqstore_remoting_transaction_ends_total",
                    "END_TRANSACTION (37) handled, by outcome (commit, rollback, unknown, "
                    "refused) and from_check (true: a producer's answer to a check).",
                    lambda: {(outcome, str(from_check).lower()): float(total)
                             for (outcome, from_check), total in counts.ends.items()},
                    labels=("outcome", "from_check")),
        CounterSpec("mqstore_remoting_transaction_checks_total",
                    "Halves the check service took up, by outcome: asked (CHECK_TRANSACTION_"
                    "STATE sent), unasked (no live producer), discarded (past "
                    "transaction_check_max, to TRANS_CHECK_MAX_TIME_TOPIC).",
                    lambda: {(outcome,): float(total) for outcome, total in
                             counts.checks.items()}, labels=("outcome",)),
        GaugeSpec("mqstore_remoting_transaction_half_messages_waiting",
                  "Half messages no op message ended, as the check service's last pass "
                  "counted them.", last_pass(lambda found: found.waiting)),
        GaugeSpec("mqstore_remoting_transaction_check_pass_timestamp_seconds",
                  "When the check service's last pass ended (Unix time).",
                  last_pass(lambda found: found.finished_ms / 1000)),
    ]


def registration_metrics(counts: Mapping[tuple[str, str], int]) -> list[GaugeSpec]:
    """The remoting front's registrations with name servers (remoting/registrar.py)."""
    return [CounterSpec("mqstore_remoting_namesrv_registrations_total",
                        "REGISTER_BROKER calls to name servers, by name server address and "
                        "outcome: success, refused, timeout, unreachable.",
                        lambda: {key: float(total) for key, total in counts.items()},
                        labels=("namesrv", "outcome"))]


class NotifierMetrics:
    def __init__(self, view: StoreView, held: HeldPulls,
                 stream_connected: Callable[[], bool], *,
                 retry_counts: RetryCounts | None = None) -> None:
        """`retry_counts`: the remoting front's, when the notifier serves one."""
        self.registry = new_registry([
            *(retry_metrics(retry_counts) if retry_counts is not None else ()),
            GaugeSpec("mqstore_pull_held_requests", "Pulls held waiting for data.",
                      lambda: held.held_count),
            GaugeSpec("mqstore_notice_stream_connected",
                      "1 while the indexer's notice stream is open.",
                      lambda: float(stream_connected())),
            GaugeSpec("mqstore_notifier_queues", "Consume queues the view knows.",
                      lambda: len(view.queues())),
            GaugeSpec("mqstore_notifier_committed_position_bytes",
                      "Committed commit log end the writer published.",
                      lambda: view.log.committed_position),
            GaugeSpec("mqstore_notifier_dispatched_position_bytes",
                      "Dispatch position the indexer published in `dispatched`.",
                      lambda: view.dispatched_position),
            CounterSpec("mqstore_reads_damaged_total",
                        "Reads that met a damaged record and served none of it "
                        "(MESSAGE_CORRUPT).", lambda: view.damaged_reads_total),
        ])
        self.pulls = Counter("mqstore_pull_requests_total", "Pulls answered, by final status.",
                             ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("mqstore_pull_latency_seconds",
                                 "Pull handling time, holds included; held: it waited.",
                                 ["endpoint", "held"],
                                 buckets=LATENCY_BUCKETS_S, registry=self.registry)
        wakeups = Counter("mqstore_pull_wakeups_total", "Held pulls woken, by cause.",
                          ["cause"], registry=self.registry)
        notices = Counter("mqstore_notices_received_total", "Notice stream lines, by type.",
                          ["type"], registry=self.registry)
        # Children resolved once: `.labels()` costs a lock and a dict lookup.
        self._wakeups = {cause: wakeups.labels(cause=cause) for cause in CAUSES}
        self._notices = {kind: notices.labels(type=kind) for kind in NOTICE_TYPES}

    def woken(self, cause: str) -> None:
        self._wakeups[cause].inc()

    def notice(self, kind: str) -> None:
        counter = self._notices.get(kind)
        if counter is not None:
            counter.inc()

    def middleware(self, endpoints: frozenset[str]) -> Any:
        """Time and count requests to the routes named in `endpoints` (the pull routes)."""
        pulls, latency = self.pulls, self.latency

        def observe(name: str, seconds: float, request: web.Request,
                    response: web.StreamResponse) -> None:
            held = "true" if request.get(HELD_KEY, False) else "false"
            latency.labels(endpoint=name, held=held).observe(seconds)
            status = request.get(STATUS_KEY) or f"HTTP_{response.status}"
            pulls.labels(endpoint=name, status=status).inc()

        return timing_middleware(endpoints, observe)
