"""`run_namesrv`: the name server process, wired in one place, until SIGTERM or SIGINT.

    NamesrvSettings ─┬─ RouteTable(brokers_max, topics_per_broker_max)
                     ├─ KvConfigTable(kv_entries_max)
                     ├─ Namesrv(settings, routes, kv) ── NamesrvServer (listeners, expiry scan)
                     └─ tls_cert_file, tls_key_file ── the listeners' TLS context (none: TCP)
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl

from mqstore.services.common.observability.logs import configure_logging
from mqstore.services.namesrv.handlers import Namesrv
from mqstore.services.namesrv.kv_config import KvConfigTable
from mqstore.services.namesrv.route_table import RouteTable
from mqstore.services.namesrv.server import NamesrvServer
from mqstore.services.namesrv.settings import NamesrvConfigError, NamesrvSettings

log = logging.getLogger("mqstore.namesrv")


def build(settings: NamesrvSettings) -> NamesrvServer:
    """The server and its tables, not yet listening; a NamesrvConfigError naming a TLS file
    that cannot be loaded."""
    tls = server_context(settings)
    routes = RouteTable(brokers_max=settings.brokers_max,
                        topics_per_broker_max=settings.topics_per_broker_max,
                        delete_topics_on_registration=settings.delete_topics_on_registration)
    return NamesrvServer(Namesrv(settings, routes, KvConfigTable(
        entries_max=settings.kv_entries_max)), ssl_context=tls)


def server_context(settings: NamesrvSettings) -> ssl.SSLContext | None:
    """What both listeners serve (None: TLS off): the construction of the services'
    listeners (services/common/settings/tls.py), which the name server does not import (it
    reaches the storage layer's errors)."""
    if not settings.tls_cert_file:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
    except (OSError, ssl.SSLError) as error:
        raise NamesrvConfigError(
            f"cannot load tls_cert_file={settings.tls_cert_file!r} with tls_key_file="
            f"{settings.tls_key_file!r}: {error}") from None
    return context


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
    tls = " (TLS)" if settings.tls_cert_file else ""
    print(f"mqstore namesrv: listening on {settings.host}:{port}{tls}", flush=True)
    if server.external_port:
        print(f"mqstore namesrv: external listener on {settings.host}:{server.external_port}"
              f"{tls}", flush=True)
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
