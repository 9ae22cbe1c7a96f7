"""`run_writer(config)`: the commitlog-writer process, from open to a graceful stop.

    open the store (takes the single-writer lock; a second writer fails here)
    → serve until SIGTERM or SIGINT, or until the store stops itself (a failed sync)
    → /readyz 503, stop accepting, let in-flight requests finish (`shutdown_timeout_ms`)
    → store.close(): drains commit and flush, writes the checkpoint, removes `abort`

Exit status: 0 after a clean stop, 1 if the store had stopped itself: a failed sync is
fatal, so the writer exits for its supervisor (Kubernetes, `mqstore up`) to restart it, and
the next open recovers from the files (the abort marker stays).
"""

from __future__ import annotations

import dataclasses
import logging

from mqstore.services.common.config_file import ServiceConfig
from mqstore.services.common.lifecycle import serve
from mqstore.services.common.logs import configure_logging
from mqstore.services.common.loops import run_service
from mqstore.storage import ConfigError, MessageStore, StoreConfig

from .app import STATE, create_app

log = logging.getLogger("mqstore.writer")


def run_writer(config: ServiceConfig) -> int:
    """Run until a signal; return the process exit status."""
    if not __debug__:
        raise ConfigError("the writer refuses to run under python -O: its asserts guard "
                          "invariants of the data it writes")
    configure_logging(service="writer", level=config.writer.log_level)
    return run_service(_serve(config), event_loop=config.writer.event_loop)


def writer_store_config(store: StoreConfig) -> StoreConfig:
    """The writer of the three services: the indexer process dispatches, so the writer does
    not, and it publishes its positions for the indexer to read."""
    return dataclasses.replace(store, dispatch_enabled=False, positions_publish_enabled=True)


async def _serve(config: ServiceConfig) -> int:
    settings = config.writer
    store = MessageStore.open(config.data_dir, writer_store_config(config.store))
    try:
        app = create_app(store, settings)

        def on_stopping() -> None:
            app[STATE].stopping = True

        await serve(app, settings, log=log, failure=lambda: store.failure,
                    on_stopping=on_stopping,
                    access_log=log.getChild("access") if settings.access_log_enabled else None,
                    details={"data_dir": str(config.data_dir),
                             "flush_mode": config.store.flush_mode.value,
                             "config": config.source})
    finally:
        store.close()
    failure = store.failure
    log.info("stopped", extra={"clean": failure is None, "failure": failure})
    return 0 if failure is None else 1

