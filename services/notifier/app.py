"""`create_app(view, offsets, settings)`: the pull-notifier's aiohttp application.

    GET  /v1/topics/{topic}/queues/{queue_id}/messages   pull by offset, long polling
    POST /v1/groups/{group}/topics/{topic}/poll          a group's poll across a topic
    POST /v1/groups/{group}/offsets                      commit offsets
    GET  /v1/groups/{group}/offsets?topic=               fetch offsets
    GET  /v1/groups                                      groups with offsets, their topics
    GET  /v1/topics/{topic}/messages?key=                lookup by key
    GET  /v1/topics/{topic}/queues/{queue_id}/offset-by-time?timestamp_ms=
    GET  /v1/messages/{physical_offset}                  lookup by commit log position
    GET  /v1/topics, /v1/topics/{topic}/queues           topics; queues with min/max offsets
    PUT, DELETE /v1/topics/{topic}                       create, delete a topic (topic_admin.py)
    GET /v1/broker, PUT /v1/broker/permission            the broker's names and permission
                                                         (broker_admin.py)
    POST /v1/groups/{group}/nacks                        a failed message, retried later or
                                                         dead-lettered (nacks.py)
    GET  /v1/retries?group=, /v1/delays                  retry and dead letter topics per group,
                                                         waiting delayed messages (retry_status.py)
    GET  /v1/transactions                                half messages, the check's progress
                                                         (transaction_status.py)
    GET  /healthz /readyz /metrics /openapi.json

A pure builder: nothing starts until the app runs.  Then its cleanup context starts the
notice stream (if `indexer_url` is set) and the refresh loop (notices.py), and stops them
with the app; on shutdown every held pull is answered at once.  The caller owns the view
and the offsets (`run.run_notifier` opens them before and closes them after the app).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from mqstore.services.auth.http_access import access_middleware
from mqstore.services.auth.http_rules import NOTIFIER_RULES
from mqstore.services.auth.http_signature import Signer
from mqstore.services.auth.users import Users
from mqstore.services.common.http.answers import add_common_routes, error_middleware
from mqstore.services.common.http.bodies import (
    ExpectHandler,
    body_size_expect_handler,
    body_size_middleware,
)
from mqstore.services.common.observability.metrics import CallbackMetrics
from mqstore.services.common.settings.auth import AuthSettings
from mqstore.services.common.settings.config_file import NotifierSettings, WriterSettings
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.common.settings.topics import TopicsSettings
from mqstore.services.notifier.answers import behind_bytes_max
from mqstore.services.notifier.broker_admin import BrokerAdmin
from mqstore.services.notifier.handlers import NotifierHandlers
from mqstore.services.notifier.held import HeldPulls
from mqstore.services.notifier.metrics import NotifierMetrics, registration_metrics
from mqstore.services.notifier.nacks import CopySender, Nacks
from mqstore.services.notifier.notices import NoticeFeed, NoticeStream, notice_signer, refresh_loop
from mqstore.services.notifier.openapi import notifier_openapi
from mqstore.services.notifier.pulls import Puller
from mqstore.services.notifier.remoting.retry_counts import RetryCounts
from mqstore.services.notifier.remoting.topics import TopicTable
from mqstore.services.notifier.retry_status import RetryStatus
from mqstore.services.notifier.topic_admin import TopicAdmin
from mqstore.services.notifier.transaction_status import add_transactions
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView

if TYPE_CHECKING:  # the front imports the notifier's held pulls: no import cycle at run time
    from mqstore.services.notifier.remoting.service import RemotingFront

log = logging.getLogger("mqstore.notifier")

PULL_ROUTES = frozenset({"pull", "poll_group"})
REQUEST_BODY_SIZE_BYTES_MAX = 1 << 20
"""Bodies here are small: a commit of 10,000 queues' offsets is about 250 KB of JSON."""


@dataclasses.dataclass
class NotifierState:
    stopping: bool = False
    """Set when shutdown begins: /readyz answers 503 so no new traffic is routed here."""
    stream: NoticeStream | None = None
    background_failure: str | None = None
    """Why a background task (stream, refresh) died, if one did: /readyz reports it."""


STATE = web.AppKey("notifier_state", NotifierState)
FEED = web.AppKey("notifier_feed", NoticeFeed)
HELD = web.AppKey("notifier_held", HeldPulls)
REMOTING = web.AppKey("notifier_remoting", object)
METRICS = web.AppKey("notifier_metrics", NotifierMetrics)


def create_app(view: StoreView, offsets: ConsumerOffsets,
               settings: NotifierSettings, *,
               remoting: RemotingFront | None = None,
               topics: TopicTable | None = None,
               indexer_ssl: ssl.SSLContext | None = None,
               users: Users | None = None,
               auth: AuthSettings | None = None,
               writer_link: CopySender | None = None,
               retry_max_times: int = RemotingSettings().retry_max_times) -> web.Application:
    """`remoting`: also serve this RocketMQ remoting front (services/notifier/remoting): it
    starts and stops with the app, and the notices wake its held pulls too.  `topics`: the
    process's topic table, shared with the front (default: one of the app's own, with the writer's
    default queue count).  `indexer_ssl`: how the notice stream verifies an https indexer
    (services/common/settings/tls.py).  `users`: who may do what (services/auth; None:
    anyone may do anything); `auth` bounds their signed requests and names the account the
    notice stream is read with.  Nacks (nacks.py) send on the front's writer link, else on
    `writer_link` (closed with the app; neither: they answer 503), and default to
    `retry_max_times`."""
    state = NotifierState()
    held = HeldPulls(held_max=settings.held_requests_max,
                     held_per_client_max=settings.held_requests_per_client_max)
    retry_counts = remoting.front.retry_counts if remoting else RetryCounts()
    metrics = NotifierMetrics(view, held, lambda: bool(state.stream and
                                                            state.stream.connected),
                              retry_counts=retry_counts)
    feed = NoticeFeed(view, held, metrics)
    puller = Puller(view, held, metrics, behind_bytes_max=behind_bytes_max(
        settings.pull_from_follower_memory_ratio),
                    queue_share_min=settings.group_poll_queue_share_min)
    table = topics or TopicTable(
        view.directory, queue_count_max=WriterSettings().topic_queue_count,
        topics_max=TopicsSettings().topics_max,
        topic_size_bytes_max=view.config.topic_size_bytes_max, on_disk=view.topics)
    admin = TopicAdmin(table, topic_bytes_max=view.config.topic_size_bytes_max)
    handlers = NotifierHandlers(view, offsets, puller, settings, topic_names=admin.names)
    auth = auth or AuthSettings()
    access = access_middleware(users, NOTIFIER_RULES,
                               clock_skew_ms_max=auth.request_clock_skew_ms_max)
    # Sizes are refused before the signature is checked (which reads the body).
    app = web.Application(client_max_size=REQUEST_BODY_SIZE_BYTES_MAX,
                          middlewares=[metrics.middleware(PULL_ROUTES), error_middleware(log),
                                       body_size_middleware(
                                           body_size_bytes_max=REQUEST_BODY_SIZE_BYTES_MAX),
                                       access])
    expect = body_size_expect_handler(body_size_bytes_max=REQUEST_BODY_SIZE_BYTES_MAX)
    app[STATE], app[FEED], app[HELD], app[METRICS] = state, feed, held, metrics
    _add_nacks(app, Nacks(view, writer_link or (remoting.front.link if remoting else None),
                          retry_counts, settings, reconsume_times_max=retry_max_times),
               expect, own_link=writer_link if remoting is None else None)
    _add_routes(app.router, handlers, admin, RetryStatus(view, topic_names=admin.names),
                expect)
    _add_broker(app.router, BrokerAdmin(table, settings, names=remoting.front.settings
                                        if remoting else RemotingSettings()), expect)
    add_transactions(app, view, offsets, metrics.registry, remoting.front if remoting else None)
    if remoting is not None:  # no series while remoting.namesrv_addresses is empty
        metrics.registry.register(CallbackMetrics(registration_metrics(
            remoting.registrar.counts)))
    app.cleanup_ctx.append(_background(feed, settings, state, indexer_ssl,
                                       notice_signer(users, auth)
                                       if users and settings.indexer_url else None))
    if remoting is not None:
        feed.add_held(remoting.held)
        remoting.front.on_woken = metrics.woken  # one set of wake-up metrics for both
        app[REMOTING] = remoting
        app.cleanup_ctx.append(_remoting(remoting))
    add_common_routes(app, registry=metrics.registry,
                      openapi=notifier_openapi(view.config, settings,
                                             queue_count_max=admin.queue_count_max),
                      not_ready=_stops(app, state, held))
    return app


def _stops(app: web.Application, state: NotifierState, held: HeldPulls
           ) -> Callable[[], str | None]:
    """On shutdown every held pull is answered at once; the app's readiness check."""
    async def answer_held_pulls(app: web.Application) -> None:
        state.stopping = True
        held.close()

    app.on_shutdown.append(answer_held_pulls)

    def not_ready() -> str | None:
        if state.stopping:
            return "shutting down"
        return state.background_failure

    return not_ready


def _add_nacks(app: web.Application, nacks: Nacks, expect: ExpectHandler, *,
               own_link: CopySender | None) -> None:
    """The nack route; `own_link` (the app's, not the front's) is closed at cleanup."""
    app.router.add_post("/v1/groups/{group}/nacks", nacks.nack, expect_handler=expect)
    if own_link is not None:
        async def close_link(app: web.Application) -> None:
            await own_link.close()

        app.on_cleanup.append(close_link)


def _add_routes(router: web.UrlDispatcher, handlers: NotifierHandlers, admin: TopicAdmin,
                retry_status: RetryStatus, expect: ExpectHandler) -> None:
    """The notifier's routes (the common ones come from add_common_routes)."""
    router.add_get("/v1/topics/{topic}/queues/{queue_id}/messages", handlers.pull, name="pull",
                   allow_head=False)
    router.add_post("/v1/groups/{group}/topics/{topic}/poll", handlers.poll_group,
                    name="poll_group", expect_handler=expect)
    router.add_post("/v1/groups/{group}/offsets", handlers.commit_offsets,
                    expect_handler=expect)
    router.add_get("/v1/groups/{group}/offsets", handlers.fetch_offsets, allow_head=False)
    router.add_get("/v1/groups", handlers.groups, allow_head=False)
    router.add_get("/v1/topics/{topic}/messages", handlers.messages_by_key, allow_head=False)
    router.add_get("/v1/topics/{topic}/queues/{queue_id}/offset-by-time",
                   handlers.offset_by_time, allow_head=False)
    router.add_get("/v1/messages/{physical_offset}", handlers.message_at, allow_head=False)
    router.add_get("/v1/topics", handlers.topics, allow_head=False)
    router.add_get("/v1/topics/{topic}/queues", handlers.queues, allow_head=False)
    router.add_put("/v1/topics/{topic}", admin.create)
    router.add_delete("/v1/topics/{topic}", admin.delete)
    router.add_get("/v1/retries", retry_status.retries, allow_head=False)
    router.add_get("/v1/delays", retry_status.delays, allow_head=False)


def _add_broker(router: web.UrlDispatcher, broker: BrokerAdmin, expect: ExpectHandler) -> None:
    router.add_get("/v1/broker", broker.broker, allow_head=False)
    router.add_put("/v1/broker/permission", broker.set_permission, expect_handler=expect)


def _background(feed: NoticeFeed, settings: NotifierSettings, state: NotifierState,
                indexer_ssl: ssl.SSLContext | None, signer: Signer | None
                ) -> Callable[[web.Application], AsyncIterator[None]]:
    async def background(app: web.Application) -> AsyncIterator[None]:
        stream = NoticeStream(feed, settings, ssl_context=indexer_ssl, signer=signer) \
            if settings.indexer_url else None
        state.stream = stream
        tasks = [asyncio.create_task(refresh_loop(feed, settings, stream), name="refresh")]
        if stream is not None:
            tasks.append(asyncio.create_task(stream.run(), name="notice-stream"))
        for task in tasks:
            task.add_done_callback(lambda done: _on_done(done, state))
        yield
        if stream is not None:
            stream.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    return background


def _remoting(front: RemotingFront) -> Callable[[web.Application], AsyncIterator[None]]:
    async def serve_remoting(app: web.Application) -> AsyncIterator[None]:
        await front.start()
        yield
        await front.close()

    return serve_remoting


def _on_done(task: asyncio.Task[None], state: NotifierState) -> None:
    """A background task ends only when cancelled; anything else is a bug: say so in
    /readyz (the orchestrator then restarts the process) and in the log.  Once the app
    is stopping, the notice stream may also end by its stop() (NoticeStream.stop)."""
    if task.cancelled() or (state.stopping and task.exception() is None):
        return
    error = task.exception()
    state.background_failure = f"background task {task.get_name()} stopped: {error!r}"
    log.error("background task stopped", exc_info=error, extra={"task": task.get_name()})
