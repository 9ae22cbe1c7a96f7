"""The indexer service: its notice stream (snapshot, then advances) and the hub's batching."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from mqstore.services.common.settings.config_file import IndexerSettings
from mqstore.services.indexer.app import create_app
from mqstore.services.indexer.notices import NoticeHub
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.storage.dispatch.split_helpers import indexer_config, writer_config


async def _next_line(response: Any) -> dict[str, Any]:
    while True:
        line = await asyncio.wait_for(response.content.readline(), 10)
        assert line, "the stream ended"
        document: dict[str, Any] = json.loads(line)
        if document["type"] != "heartbeat":
            return document


def test_stream_starts_with_a_snapshot_then_advances(store_dir: Path) -> None:
    async def scenario() -> None:
        writer = MessageStore.open(store_dir, writer_config())
        for n in range(5):
            assert writer.put(Message("Orders", n % 2, b"x")).ok
        loop = asyncio.get_running_loop()
        hub_box: list[Indexer] = []
        hub = NoticeHub(batch_latency_ms=2, subscriber_lines_max=100, snapshot=lambda: [
            (q.topic, q.queue_id, q.min_offset, q.max_offset) for q in hub_box[0].queues])
        indexer = Indexer.open(store_dir, indexer_config(), listener=hub.threadsafe(loop))
        hub_box.append(indexer)
        try:
            while indexer.dispatched_position < writer.committed_position:
                await asyncio.sleep(0.01)
            app = create_app(indexer, hub, IndexerSettings(notice_heartbeat_interval_ms=50))
            async with TestClient(TestServer(app)) as client:
                response = await client.get("/v1/notices")
                assert response.headers["Content-Type"] == "application/x-ndjson"
                snapshot = await _next_line(response)
                assert snapshot["type"] == "snapshot"
                assert sorted(map(tuple, snapshot["queues"])) == [("Orders", 0, 0, 3),
                                                                  ("Orders", 1, 0, 2)]
                assert writer.put(Message("Orders", 1, b"late")).ok
                advanced = await _next_line(response)
                assert advanced == {"type": "advanced", "queues": [["Orders", 1, 3]]}
                status = await (await client.get("/v1/status")).json()
                assert status["dispatch_behind_bytes"] == 0
                assert status["failure"] is None
                metrics = await (await client.get("/metrics")).text()
                assert "mqstore_notice_subscribers 1.0" in metrics
                response.close()
        finally:
            indexer.close()
            writer.close()

    asyncio.run(scenario())


def test_hub_sends_at_once_when_quiet_and_batches_when_busy() -> None:
    async def scenario() -> list[dict[str, Any]]:
        hub = NoticeHub(batch_latency_ms=50, subscriber_lines_max=100, snapshot=list)
        subscriber = hub.subscribe()
        hub.add({("T", 0): 1})  # quiet: goes out at once
        lines = [subscriber.lines.get_nowait(), subscriber.lines.get_nowait()]
        for n in range(2, 12):  # busy: held and merged, the newest offset per queue wins
            hub.add({("T", 0): n, ("T", n % 3): n})
        assert subscriber.lines.qsize() == 0
        await asyncio.sleep(0.1)
        while not subscriber.lines.empty():
            lines.append(subscriber.lines.get_nowait())
        return [json.loads(line) for line in lines if line is not None]

    lines = asyncio.run(scenario())
    assert lines[0] == {"type": "snapshot", "queues": []}
    assert lines[1] == {"type": "advanced", "queues": [["T", 0, 1]]}
    assert len(lines) == 3
    assert sorted(map(tuple, lines[2]["queues"])) == [("T", 0, 11), ("T", 1, 10), ("T", 2, 11)]


def test_a_slow_subscriber_is_dropped_not_buffered() -> None:
    async def scenario() -> tuple[bool, int]:
        hub = NoticeHub(batch_latency_ms=1, subscriber_lines_max=3, snapshot=list)
        subscriber = hub.subscribe()
        for n in range(10):
            hub.add({("T", 0): n + 1})
            hub.flush()
        return subscriber.dropped, hub.subscriber_count

    assert asyncio.run(scenario()) == (True, 0)


def test_a_subscriber_takes_every_waiting_line_as_one_chunk_then_heartbeats() -> None:
    async def scenario() -> list[tuple[bytes, bool]]:
        hub = NoticeHub(batch_latency_ms=1, subscriber_lines_max=100, snapshot=list)
        subscriber = hub.subscribe()
        hub.add({("T", 0): 1})  # quiet: out at once, behind the snapshot
        taken = [await subscriber.take(5.0, idle_line=b"idle\n")]
        taken.append(await subscriber.take(0.01, idle_line=b"idle\n"))  # nothing waits
        hub.close()
        taken.append(await subscriber.take(5.0, idle_line=b"idle\n"))
        return taken

    (chunk, ended), idle, end = asyncio.run(scenario())
    assert not ended
    assert [json.loads(line)["type"] for line in chunk.splitlines()] == ["snapshot", "advanced"]
    assert idle == (b"idle\n", False)
    assert end == (b"", True)
