"""`run_namesrv`: the name server process, wired in one place, until SIGTERM or SIGINT.

    NamesrvSettings ─┬─ RouteTable(brokers_max, topics_per_broker_max)
                     ├─ KvConfigTable(kv_entries_max)
                     └─ Namesrv(settings, routes, kv) ── NamesrvServer (listener, expiry scan)
"""

from __future__ import annotations

import asyncio
import logging
import signal

from mqstore.services.common.observability.logs import configure_logging
from mqstore.services.namesrv.handlers import Namesrv
from mqstore.services.namesrv.kv_config import KvConfigTable
from mqstore.services.namesrv.route_table import RouteTable
from mqstore.services.namesrv.server import NamesrvServer
from mqstore.services.namesrv.settings import NamesrvConfigError, NamesrvSettings

log = logging.getLogger("mqstore.namesrv")


def build(settings: NamesrvSettings) -> NamesrvServer:
    """The server and its tables, not yet listening."""
    routes = RouteTable(brokers_max=settings.brokers_max,
                        topics_per_broker_max=settings.topics_per_broker_max,
                        delete_topics_on_registration=settings.delete_topics_on_registration)
    return NamesrvServer(Namesrv(settings, routes, KvConfigTable(
        entries_max=settings.kv_entries_max)))


def run_namesrv(settings: NamesrvSettings, *, log_level: str = "INFO") -> int:
    """Run until a signal; return the process exit status."""
    if not __debug__:
        raise NamesrvConfigError("the name server refuses to run under python -O: its "
                                 "asserts guard its tables")
    configure_logging(service="namesrv", level=log_level)
    return asyncio.run(_serve(settings))


async def _serve(settings: NamesrvSettings) -> int:
    server = build(settings)
    port = await server.start()
    print(f"mqstore namesrv: listening on {settings.host}:{port}", flush=True)
    if server.external_port:
        print(f"mqstore namesrv: external listener on {settings.host}:{server.external_port}",
              flush=True)
    loop = asyncio.get_running_loop()
    stopped: asyncio.Future[int] = loop.create_future()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, _settle, stopped, int(number))
    try:
        received = await stopped
        log.info("namesrv stopping", extra={"signal": received})
    finally:
        await server.close()
    return 0


def _settle(stopped: asyncio.Future[int], number: int) -> None:
    if not stopped.done():
        stopped.set_result(number)
