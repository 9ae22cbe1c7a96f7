"""`run_notifier(config)`: the pull-notifier process, from open to a graceful stop.

    open a view of `data_dir` (read-only: no lock, so replicas and the writer and the
    indexer share the directory) and the group offsets (`config/consumer-offsets/`)
    → serve until SIGTERM or SIGINT (the notice stream and the refresh loop run meanwhile)
    → /readyz 503, held pulls answered at once, in-flight requests finish
      (`shutdown_timeout_ms`) → close the view

Exit status: 0 after a stop on a signal.
"""

from __future__ import annotations

import logging

from mqstore.services.auth import users_of
from mqstore.services.common.config_file import ServiceConfig
from mqstore.services.common.lifecycle import serve
from mqstore.services.common.logs import configure_logging
from mqstore.services.common.loops import run_service
from mqstore.storage import ConfigError
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView

from .app import create_app

log = logging.getLogger("mqstore.notifier")


def run_notifier(config: ServiceConfig) -> int:
    """Run until a signal; return the process exit status."""
    if not __debug__:
        raise ConfigError("the notifier refuses to run under python -O: its asserts guard "
                          "what it reads and the offsets it writes")
    configure_logging(service="notifier", level=config.notifier.log_level)
    return run_service(_serve(config), event_loop=config.notifier.event_loop)


async def _serve(config: ServiceConfig) -> int:
    settings = config.notifier
    users = users_of(config.auth)
    view = StoreView.open(config.data_dir, config.store)
    try:
        offsets = ConsumerOffsets(config.data_dir,
                                  lock_timeout_ms=settings.offsets_lock_timeout_ms)
        # Imported here: the front uses the notifier's held pulls (no cycle at import time).
        from mqstore.services.remoting.service import RemotingFront  # noqa: PLC0415

        remoting = RemotingFront(view, offsets, config.remoting,
                                 queue_count_max=config.writer.topic_queue_count,
                                 users=users) \
            if config.remoting.enabled else None
        app = create_app(view, offsets, settings, remoting=remoting, users=users,
                         auth=config.auth)
        await serve(app, settings, log=log, failure=lambda: None,
                    details={"data_dir": str(config.data_dir),
                             "indexer_url": settings.indexer_url, "config": config.source})
    finally:
        view.close()
    log.info("stopped")
    return 0
