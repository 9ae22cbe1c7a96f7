"""`create_app(store, settings)`: the writer's aiohttp application, a pure builder.

    POST /v1/topics/{topic}/messages         one JSON message
    POST /v1/topics/{topic}/messages/batch   {"messages": [...]}, one topic
    POST /v1/batch                           binary batch (batch_wire.BatchCodec), any topics
    GET  /v1/replication                     role, followers and their lag (replication_status)
    GET  /healthz /readyz /metrics /openapi.json

The caller owns the store: `run.run_writer` opens it before and closes it after the app.
"""

from __future__ import annotations

import dataclasses
import logging

from aiohttp import web

from mqstore.services.auth.http_access import access_middleware
from mqstore.services.auth.http_rules import WRITER_RULES
from mqstore.services.auth.users import Users
from mqstore.services.common.http.answers import add_common_routes, error_middleware, json_response
from mqstore.services.common.http.bodies import body_size_expect_handler, body_size_middleware
from mqstore.services.common.settings.auth import AuthSettings
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.common.settings.topics import TopicsSettings
from mqstore.services.writer.admission import Admission
from mqstore.services.writer.handlers import WriterHandlers
from mqstore.services.writer.metrics import WriterMetrics
from mqstore.services.writer.openapi import writer_openapi
from mqstore.services.writer.produce import ProduceCore
from mqstore.services.writer.replication_follower import ReplicationClient
from mqstore.services.writer.replication_status import replication_status
from mqstore.services.writer.topic_gate import TopicGate
from mqstore.storage import MessageStore

log = logging.getLogger("mqstore.writer")

PUT_ROUTES = frozenset({"put_message", "put_topic_batch", "put_batch"})


@dataclasses.dataclass
class WriterState:
    stopping: bool = False
    """Set when shutdown begins: /readyz answers 503 so no new traffic is routed here."""


STATE = web.AppKey("writer_state", WriterState)
METRICS = web.AppKey("writer_metrics", WriterMetrics)
HANDLERS = web.AppKey("writer_handlers", WriterHandlers)
PRODUCE = web.AppKey("writer_produce", ProduceCore)
"""The one produce core, which the forward listener shares with the views."""
ADMISSION = web.AppKey("writer_admission", Admission)


def create_app(store: MessageStore, settings: WriterSettings, *,
               follower: ReplicationClient | None = None,
               topics: TopicsSettings | None = None, users: Users | None = None,
               auth: AuthSettings | None = None) -> web.Application:
    """`follower`: a follower's replication client (its status and metrics are served here,
    and its produce routes refuse with 403).  `topics`: which topics produces may write
    (default: the section's defaults).  `users`: who may do what (services/auth; None:
    anyone may do anything); `auth` bounds their signed requests."""
    admission = Admission(limit=settings.put_requests_in_flight_max,
                          per_client_limit=settings.put_requests_per_client_max,
                          retry_after_s=settings.retry_after_s)
    metrics = WriterMetrics(store, admission, follower=follower)
    gate = TopicGate(topics or TopicsSettings(), data_dir=store.directory,
                     known=store.topic_names())
    core = ProduceCore(store, settings, metrics, gate=gate,
                       master=follower.settings.master if follower else "")
    handlers = WriterHandlers(core, store, settings)
    state = WriterState()
    # Middlewares run outermost first: metrics sees the final code of every answer,
    # including the errors the error middleware shapes (admission's 503 among them); an
    # oversized body is refused before it takes an admission slot, and admission refuses
    # before the access check reads a body.
    body_size_bytes_max = settings.request_body_size_bytes_max
    access = access_middleware(users, WRITER_RULES, clock_skew_ms_max=(
        auth or AuthSettings()).request_clock_skew_ms_max)
    app = web.Application(client_max_size=body_size_bytes_max,
                          middlewares=[metrics.middleware(PUT_ROUTES), error_middleware(log),
                                       body_size_middleware(
                                           body_size_bytes_max=body_size_bytes_max),
                                       admission.middleware(PUT_ROUTES), access])
    expect = body_size_expect_handler(body_size_bytes_max=body_size_bytes_max)
    app[STATE] = state
    app[METRICS] = metrics
    app[HANDLERS] = handlers
    app[PRODUCE] = core
    app[ADMISSION] = admission
    router = app.router
    router.add_post("/v1/topics/{topic}/messages", handlers.put_message, name="put_message",
                    expect_handler=expect)
    router.add_post("/v1/topics/{topic}/messages/batch", handlers.put_topic_batch,
                    name="put_topic_batch", expect_handler=expect)
    router.add_post("/v1/batch", handlers.put_batch, name="put_batch", expect_handler=expect)

    async def replication(request: web.Request) -> web.Response:
        return json_response(replication_status(store, follower))

    router.add_get("/v1/replication", replication, allow_head=False)

    def not_ready() -> str | None:
        if state.stopping:
            return "shutting down"
        if store.failure is not None:
            return f"store stopped: {store.failure}"
        if store.closed:
            return "store is closed"
        if follower is not None and (behind := follower.not_caught_up()) is not None:
            return behind
        return admission.saturated()

    add_common_routes(app, registry=metrics.registry,
                      openapi=writer_openapi(store.config, settings),
                      not_ready=not_ready)
    return app
