"""Helpers for service tests: serve an app in-process, on the test's loop or on a thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.storage import MessageStore

T = TypeVar("T")


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    """Run one async test scenario on a fresh loop (no pytest plugin needed)."""
    async def main() -> T:
        return await scenario()

    return asyncio.run(main())


@contextlib.asynccontextmanager
async def writer_client(store: MessageStore, settings: WriterSettings | None = None
                        ) -> AsyncIterator[TestClient[Any, Any]]:
    app = create_app(store, settings or WriterSettings())
    async with TestClient(TestServer(app)) as client:
        yield client


@contextlib.contextmanager
def app_on_thread(app: web.Application, *,
                  loop: asyncio.AbstractEventLoop | None = None) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 from a thread of its own (for blocking clients); yield its
    base URL.  The app's handlers run on that thread, on `loop` if given (made before the
    app, for parts that must know it, such as an indexer's notice hub)."""
    loop = loop or asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2)
    started = threading.Event()
    address: list[Any] = []

    async def start() -> None:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        address.extend(runner.addresses[0][:2])
        started.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name="test-server", daemon=True)
    thread.start()
    assert started.wait(10), "the test server did not start"
    try:
        yield f"http://{address[0]}:{address[1]}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
