"""Helpers for notifier tests: the three parties on one directory, in the test's process.

`stack(store_dir)` opens a writer store (split mode), the indexer engine with its real notice
service (services/indexer) on a test server, and a notifier app whose notice stream follows
that service; `notifier_only(store_dir)` serves a notifier on a directory nobody writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from mqstore.services.common.settings.config_file import IndexerSettings, NotifierSettings
from mqstore.services.indexer.app import create_app as create_indexer_app
from mqstore.services.indexer.notices import NoticeHub
from mqstore.services.notifier import create_app
from mqstore.services.notifier.app import STATE
from mqstore.storage import MessageStore, StoreConfig
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView
from tests.storage.dispatch.split_helpers import indexer_config, writer_config

Client = TestClient[Any, Any]


@dataclasses.dataclass
class Stack:
    writer: MessageStore
    indexer: Indexer
    view: StoreView
    client: Client
    app: web.Application


def view_config(**overrides: Any) -> StoreConfig:
    return indexer_config(**overrides)


def settings(**overrides: Any) -> NotifierSettings:
    values: dict[str, Any] = {"indexer_url": "", "refresh_interval_ms": 20,
                              "notice_reconnect_initial_ms": 10,
                              "notice_reconnect_max_ms": 100}
    values.update(overrides)
    return NotifierSettings(**values)


@contextlib.asynccontextmanager
async def notifier_app(store_dir: Path, notifier_settings: NotifierSettings, *,
                       config: StoreConfig | None = None
                       ) -> AsyncIterator[tuple[Client, web.Application, StoreView]]:
    view = StoreView.open(store_dir, config or view_config())
    offsets = ConsumerOffsets(store_dir, lock_timeout_ms=notifier_settings.offsets_lock_timeout_ms)
    app = create_app(view, offsets, notifier_settings)
    try:
        async with TestClient(TestServer(app)) as client:
            yield client, app, view
    finally:
        view.close()


def writer_and_indexer(store_dir: Path) -> tuple[NoticeHub, MessageStore, Indexer]:
    """A writer and an indexer on `store_dir`, the indexer's notices fed to a hub on the
    running loop (call from a coroutine); the caller closes all three."""
    loop = asyncio.get_running_loop()
    indexer_ref: list[Indexer] = []
    hub = NoticeHub(batch_latency_ms=2, subscriber_lines_max=10_000, snapshot=lambda: [
        (q.topic, q.queue_id, q.min_offset, q.max_offset) for q in indexer_ref[0].queues])
    writer = MessageStore.open(store_dir, writer_config())
    indexer = Indexer.open(store_dir, indexer_config(), listener=hub.threadsafe(loop))
    indexer_ref.append(indexer)
    return hub, writer, indexer


@contextlib.asynccontextmanager
async def stack(store_dir: Path, **overrides: Any) -> AsyncIterator[Stack]:
    """Writer + indexer (with its notice service) + notifier following the stream."""
    hub, writer, indexer = writer_and_indexer(store_dir)
    indexer_server = TestServer(create_indexer_app(indexer, hub, IndexerSettings()))
    try:
        await indexer_server.start_server()
        url = f"http://127.0.0.1:{indexer_server.port}"
        async with notifier_app(store_dir, settings(indexer_url=url, **overrides)) as (
                client, app, view):
            await wait_connected(app)
            yield Stack(writer, indexer, view, client, app)
            hub.close()
    finally:
        await indexer_server.close()
        indexer.close()
        writer.close()


async def wait_connected(app: web.Application, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        stream = app[STATE].stream
        if stream is not None and stream.connected:
            return
        assert asyncio.get_running_loop().time() < deadline, "the notice stream never opened"
        await asyncio.sleep(0.01)


async def metric(client: Client, name: str, **labels: str) -> float:
    """The value of one series of the notifier's /metrics (0 if absent)."""
    text = await (await client.get("/metrics")).text()
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    pattern = re.escape(name) + (r"\{" + re.escape(wanted) + r"\}" if labels else "") + \
        r" ([0-9.e+-]+)$"
    for line in text.splitlines():
        found = re.match(pattern, line)
        if found:
            return float(found.group(1))
    return 0.0


async def wait_until(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.005)
