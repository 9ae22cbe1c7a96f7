"""Process lifecycle shared by the services: serve an app until a signal or a failure."""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
from collections.abc import Callable, Mapping

from aiohttp import web

from mqstore.services.common.http.server import GuardedRunner
from mqstore.services.common.settings.config_file import ServiceSettings


async def first_signal() -> int:
    """Return the number of the first SIGTERM/SIGINT.  The handlers stay until the loop
    closes: a second signal during the drain is ignored rather than interrupting the close."""
    loop = asyncio.get_running_loop()
    received: asyncio.Future[int] = loop.create_future()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _settle, received, signum)
    return await received


def _settle(received: asyncio.Future[int], signum: int) -> None:
    if not received.done():
        received.set_result(signum)


async def stop_reason(failure: Callable[[], str | None], *, poll_interval_s: float = 0.2) -> str:
    """Wait for SIGTERM/SIGINT or for `failure()` to name one; return which.  A service whose
    engine stopped itself exits (and is restarted by its supervisor) instead of idling
    unready: every service recovers from its files on start."""
    signalled = asyncio.ensure_future(first_signal())
    try:
        while not signalled.done():
            reason = failure()
            if reason is not None:
                return f"failure: {reason}"
            await asyncio.wait([signalled], timeout=poll_interval_s)
        return signal.Signals(signalled.result()).name
    finally:
        signalled.cancel()


async def serve(app: web.Application, settings: ServiceSettings, *, log: logging.Logger,
                details: Mapping[str, object], failure: Callable[[], str | None],
                on_stopping: Callable[[], None] | None = None,
                access_log: logging.Logger | None = None,
                ssl_context: ssl.SSLContext | None = None) -> None:
    """Serve `app` until a signal or `failure()`: log "listening" (with the bound port and
    `details`), then "stopping" with the reason; `on_stopping` runs before in-flight requests
    are given `shutdown_timeout_ms` to finish.  The caller closes its engine afterwards.
    `ssl_context`: serve only TLS (services/common/settings/tls.py)."""
    runner = GuardedRunner(app, header_read_timeout_ms=settings.header_read_timeout_ms,
                           shutdown_timeout=settings.shutdown_timeout_ms / 1000,
                           access_log=access_log)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port, ssl_context=ssl_context)
        await site.start()
        host, port = runner.addresses[0][:2]
        log.info("listening", extra={"host": host, "port": port,
                                     "tls": ssl_context is not None, **details})
        reason = await stop_reason(failure)
        log.info("stopping", extra={"reason": reason})
        if on_stopping is not None:
            on_stopping()
    finally:
        await runner.cleanup()
