"""`run_indexer(config)`: the reput/indexer process, from open to a graceful stop.

    open the indexer (takes `indexer.lock`; a second indexer fails here) → dispatch runs in
    its threads, up to what the writer publishes (it may start before the writer)
    → serve the notice stream until SIGTERM or SIGINT
    → end every stream, stop the listener, `indexer.close()` (dispatch catches up, consume
      queues are synced, `dispatched` published, `indexer.abort` removed)

Exit status: 0 after a clean stop, 1 if dispatch had stopped itself (the next start recovers).
"""

from __future__ import annotations

import asyncio
import logging

from mqstore.services.auth import users_of
from mqstore.services.common.observability.logs import configure_logging
from mqstore.services.common.process.lifecycle import serve
from mqstore.services.common.process.loops import run_service
from mqstore.services.common.settings.config_file import ServiceConfig
from mqstore.services.common.settings.tls import server_context
from mqstore.services.indexer.app import STATE, create_app
from mqstore.services.indexer.notices import NoticeHub
from mqstore.storage.dispatch.indexer import Indexer

log = logging.getLogger("mqstore.indexer")


def run_indexer(config: ServiceConfig) -> int:
    configure_logging(service="indexer", level=config.indexer.log_level)
    return run_service(_serve(config), event_loop=config.indexer.event_loop)


async def _serve(config: ServiceConfig) -> int:
    settings = config.indexer
    users = users_of(config.auth)  # a bad users file stops the start before the indexer opens
    indexer_ref: list[Indexer] = []

    def snapshot() -> list[tuple[str, int, int, int]]:
        return [(queue.topic, queue.queue_id, queue.min_offset, queue.max_offset)
                for queue in indexer_ref[0].queues]

    hub = NoticeHub(batch_latency_ms=settings.notice_batch_latency_ms,
                    subscriber_lines_max=settings.notice_subscriber_lines_max,
                    snapshot=snapshot)
    indexer = Indexer.open(config.data_dir, config.store,
                           listener=hub.threadsafe(asyncio.get_running_loop()))
    indexer_ref.append(indexer)
    try:
        app = create_app(indexer, hub, settings, users=users, auth=config.auth)

        def on_stopping() -> None:
            app[STATE].stopping = True
            hub.close()

        await serve(app, settings, log=log, failure=lambda: indexer.failure,
                    on_stopping=on_stopping, ssl_context=server_context(config.tls),
                    details={"data_dir": str(config.data_dir), "config": config.source})
    finally:
        indexer.close()
    log.info("stopped", extra={"clean": indexer.failure is None, "failure": indexer.failure})
    return 0 if indexer.failure is None else 1
