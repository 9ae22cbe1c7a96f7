"""`create_app(indexer, hub, settings)`: the indexer's aiohttp application, a pure builder.

    GET /v1/notices     NDJSON stream: a snapshot line, then "advanced" lines, heartbeats
    GET /v1/status      dispatch position, lag, the writer generation it follows
    GET /healthz /readyz /metrics /openapi.json

Stream lines (one JSON object each, `\\n`-terminated):

    {"type": "snapshot", "queues": [[topic, queue_id, min_offset, max_offset], ...]}
    {"type": "advanced", "queues": [[topic, queue_id, next_offset], ...]}
    {"type": "heartbeat"}                      every `notice_heartbeat_interval_ms`
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Iterator

from aiohttp import web
from prometheus_client import Counter
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from mqstore.services.auth.http_access import access_middleware
from mqstore.services.auth.http_rules import INDEXER_RULES
from mqstore.services.auth.users import Users
from mqstore.services.common.http.answers import add_common_routes, error_middleware, json_response
from mqstore.services.common.observability.metrics import CounterSpec, GaugeSpec, new_registry
from mqstore.services.common.settings.auth import AuthSettings
from mqstore.services.common.settings.config_file import IndexerSettings
from mqstore.services.indexer.notices import NoticeHub
from mqstore.services.indexer.openapi import indexer_openapi
from mqstore.storage.dispatch.indexer import Indexer

log = logging.getLogger("mqstore.indexer")

NDJSON_MEDIA_TYPE = "application/x-ndjson"
HEARTBEAT = b'{"type":"heartbeat"}\n'


@dataclasses.dataclass
class IndexerState:
    stopping: bool = False


STATE = web.AppKey("indexer_state", IndexerState)


def create_app(indexer: Indexer, hub: NoticeHub, settings: IndexerSettings, *,
               users: Users | None = None, auth: AuthSettings | None = None
               ) -> web.Application:
    """`users`: who may do what (services/auth; None: anyone may do anything)."""
    state = IndexerState()
    registry = new_registry(_gauges(indexer, hub))
    registry.register(_HubCounters(hub))
    streams = Counter("mqstore_notice_streams_opened_total",
                      "Notice streams opened by notifiers.",
                      registry=registry)
    heartbeat_s = settings.notice_heartbeat_interval_ms / 1000

    async def notices(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": NDJSON_MEDIA_TYPE,
                                               "Cache-Control": "no-store"})
        await response.prepare(request)
        streams.inc()
        subscriber = hub.subscribe()
        try:
            ended = False
            while not state.stopping and not ended:
                chunk, ended = await subscriber.take(heartbeat_s, idle_line=HEARTBEAT)
                if chunk:
                    await response.write(chunk)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            hub.unsubscribe(subscriber)
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    async def status(request: web.Request) -> web.Response:
        return json_response(_status(indexer))

    def not_ready() -> str | None:
        if state.stopping:
            return "shutting down"
        if indexer.failure is not None:
            return f"indexer stopped: {indexer.failure}"
        return None

    access = access_middleware(users, INDEXER_RULES, clock_skew_ms_max=(
        auth or AuthSettings()).request_clock_skew_ms_max)
    app = web.Application(middlewares=[error_middleware(log), access])
    app[STATE] = state
    app.router.add_get("/v1/notices", notices, allow_head=False)
    app.router.add_get("/v1/status", status, allow_head=False)
    add_common_routes(app, registry=registry, openapi=indexer_openapi(), not_ready=not_ready)
    return app


def _status(indexer: Indexer) -> dict[str, object]:
    published = indexer.published
    return {
        "dispatched_position": indexer.dispatched_position,
        "synced_position": indexer.synced_position,
        "dispatch_behind_bytes": indexer.dispatch_behind_bytes,
        "writer_generation": indexer.writer_generation,
        "writer_committed_position": published["committed_position"] if published else None,
        "failure": indexer.failure,
        "stalled_reason": indexer.stalled_reason,
        "stalled_queues": [{"topic": q.topic, "queue_id": q.queue_id,
                            "queue_offset": q.queue_offset, "physical_offset": q.physical_offset,
                            "reason": q.reason} for q in indexer.stalled_queues],
    }


def _gauges(indexer: Indexer, hub: NoticeHub) -> list[GaugeSpec]:
    return [
        GaugeSpec("mqstore_dispatch_behind_bytes",
                  "Committed commit log bytes not yet in the consume queues and the index.",
                  lambda: indexer.dispatch_behind_bytes),
        GaugeSpec("mqstore_dispatch_position_bytes",
                  "Commit log position dispatch has reached.", lambda: indexer.dispatched_position),
        GaugeSpec("mqstore_dispatch_synced_position_bytes",
                  "Commit log position below which consume queues are synced.",
                  lambda: indexer.synced_position),
        GaugeSpec("mqstore_dispatch_stalled",
                  "1 while dispatch waits for disk space to create a consume queue or index "
                  "file (it retries; the reason is in /v1/status).",
                  lambda: int(indexer.stalled_reason is not None)),
        GaugeSpec("mqstore_dispatch_stalled_queues",
                  "Consume queues an error of their own files stalled (a name the file system "
                  "refuses, EIO); the others go on. Which, and why: /v1/status.",
                  lambda: len(indexer.dispatcher.stalled_queues)),
        GaugeSpec("mqstore_consume_queues", "Consume queues in the store.",
                  lambda: sum(1 for _ in indexer.queues)),
        CounterSpec("mqstore_dispatch_damaged_ranges_total",
                    "Damaged commit log ranges dispatch skipped (their queue offsets answer "
                    "MESSAGE_CORRUPT).", lambda: indexer.dispatcher.damaged_ranges_total),
        CounterSpec("mqstore_dispatch_queue_holes_total",
                    "Queue holes no damage explained (offsets given out with no record): "
                    "filled with entries that answer MESSAGE_CORRUPT.",
                    lambda: indexer.dispatcher.queue_holes_total),
        GaugeSpec("mqstore_notice_subscribers", "Notifiers connected to the notice stream.",
                  lambda: hub.subscriber_count),
    ]


class _HubCounters(Collector):
    """The hub's running totals as Prometheus counters, read at scrape time (the hub counts
    on the event loop; nothing is added to the notice path)."""

    def __init__(self, hub: NoticeHub) -> None:
        self._hub = hub

    def describe(self) -> Iterator[CounterMetricFamily]:
        return self.collect()

    def collect(self) -> Iterator[CounterMetricFamily]:
        hub = self._hub
        yield CounterMetricFamily("mqstore_notice_lines_sent_total",
                                  "Notice lines written to subscribers (one per subscriber).",
                                  value=hub.lines_sent_total)
        yield CounterMetricFamily("mqstore_notices_sent_total",
                                  "Queue advances sent (one per queue per line).",
                                  value=hub.queues_noticed_total)
        yield CounterMetricFamily("mqstore_notice_subscribers_dropped_total",
                                  "Subscribers disconnected for falling behind.",
                                  value=hub.subscribers_dropped_total)
