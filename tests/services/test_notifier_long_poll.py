"""Long polling: a held pull wakes when its queue moves, not when its wait ends."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from mqstore.services.notifier.app import FEED, HELD, STATE
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.services.notifier_stack import metric, notifier_app, settings, stack, wait_until
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

PULL = "/v1/topics/Late/queues/0/messages"
CONNECTIONS = web.AppKey("connections", list[int])


def test_a_held_pull_wakes_on_the_notice_of_a_late_message(store_dir: Path) -> None:
    async def scenario() -> None:
        async with stack(store_dir) as parties:
            client = parties.client
            pull = asyncio.create_task(client.get(PULL, params={"offset": "0",
                                                                "wait_ms": "30000"}))
            await wait_until(lambda: parties.app[HELD].held_count == 1)
            await asyncio.sleep(0.2)
            assert not pull.done()
            assert parties.writer.put(Message("Late", 0, b"late news", tags="t")).ok
            response = await asyncio.wait_for(pull, 5)  # the wait was 30 s
            assert response.status == 200
            answer = await response.json()
            assert answer["status"] == "FOUND"
            assert [base64.b64decode(m["body_base64"]) for m in answer["messages"]] == \
                [b"late news"]
            assert answer["next_offset"] == 1
            assert await metric(client, "mqstore_pull_wakeups_total", cause="notice") == 1
            assert await metric(client, "mqstore_pull_wakeups_total", cause="timeout") == 0
            assert await metric(client, "mqstore_pull_requests_total", endpoint="pull",
                                status="FOUND") == 1

    run(scenario)


def test_a_group_poll_wakes_for_a_queue_that_did_not_exist(store_dir: Path) -> None:
    async def scenario() -> None:
        async with stack(store_dir) as parties:
            poll = asyncio.create_task(parties.client.post(
                "/v1/groups/g1/topics/Fresh/poll", json={"wait_ms": 30000}))
            await wait_until(lambda: parties.app[HELD].held_count == 1)
            assert parties.writer.put(Message("Fresh", 5, b"first")).ok
            answer = await (await asyncio.wait_for(poll, 5)).json()
            assert [(m["queue_id"], m["queue_offset"]) for m in answer["messages"]] == [(5, 0)]
            assert answer["next_offsets"] == {"5": 1}
            assert await metric(parties.client, "mqstore_pull_wakeups_total",
                                cause="notice") == 1

    run(scenario)


def test_a_held_pull_answers_empty_when_its_wait_ends(store_dir: Path) -> None:
    async def scenario() -> None:
        async with stack(store_dir) as parties:
            response = await parties.client.get(PULL, params={"offset": "0", "wait_ms": "300"})
            answer = await response.json()
            assert (answer["status"], answer["messages"], answer["next_offset"]) == \
                ("NO_MESSAGE_IN_QUEUE", [], 0)
            assert await metric(parties.client, "mqstore_pull_wakeups_total",
                                cause="timeout") == 1

    run(scenario)


def test_without_a_stream_the_refresh_pass_wakes_held_pulls(store_dir: Path) -> None:
    """The indexer's notice service is down: `dispatched` still vouches for new entries."""
    async def scenario() -> None:
        with MessageStore.open(store_dir, writer_config()) as writer, \
                Indexer.open(store_dir, indexer_config()) as indexer:
            async with notifier_app(store_dir, settings(refresh_interval_ms=20)) as (
                    client, app, _):
                pull = asyncio.create_task(client.get(PULL, params={"offset": "0",
                                                                    "wait_ms": "30000"}))
                await wait_until(lambda: app[HELD].held_count == 1)
                assert writer.put(Message("Late", 0, b"x")).ok
                wait_dispatched(indexer, writer.committed_position)
                answer = await (await asyncio.wait_for(pull, 10)).json()
                assert answer["status"] == "FOUND"
                assert await metric(client, "mqstore_pull_wakeups_total", cause="refresh") == 1

    run(scenario)


def _fake_indexer(lines_per_connection: list[list[dict[str, object]]], *,
                  line_gap_s: float = 0.0) -> web.Application:
    """Serves each connection its list of notice lines, `line_gap_s` apart, then ends (the
    last one stays open)."""
    connections: list[int] = []

    async def notices(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        index = min(len(connections), len(lines_per_connection) - 1)
        connections.append(index)
        for at, line in enumerate(lines_per_connection[index]):
            if at and line_gap_s:
                await asyncio.sleep(line_gap_s)
            await response.write(json.dumps(line).encode() + b"\n")
        if len(connections) >= len(lines_per_connection):
            await asyncio.sleep(3600)  # the last stream stays open until the test ends
        return response

    app = web.Application()
    app.router.add_get("/v1/notices", notices)
    app[CONNECTIONS] = connections
    return app


def test_the_stream_reconnects_and_takes_each_snapshot_as_the_truth(store_dir: Path) -> None:
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        for body in (b"a", b"b", b"c"):
            assert writer.put(Message("S", 0, body)).ok
        wait_dispatched(indexer, writer.committed_position)

    async def scenario() -> None:
        fake = _fake_indexer([
            [{"type": "snapshot", "queues": [["S", 0, 0, 3]]}],  # ends: reconnect
            [{"type": "heartbeat"}, {"type": "snapshot", "queues": [["S", 0, 0, 2]]},
             {"type": "heartbeat"}],
        ])
        async with _served(fake) as url, notifier_app(store_dir, settings(
                indexer_url=url, refresh_interval_ms=3_600_000)) as (client, app, view):
            await wait_until(lambda: len(fake[CONNECTIONS]) == 2 and
                             view.max_offset("S", 0) == 2)
            queues = await (await client.get("/v1/topics/S/queues")).json()
            assert queues["queues"] == [{"queue_id": 0, "min_offset": 0, "max_offset": 2}]
            assert app[STATE].stream is not None
            assert app[STATE].stream.connections_total == 2
            assert await metric(client, "mqstore_notices_received_total",
                                type="snapshot") == 2
            assert app[FEED].advanced({("S", 0): 3}) == 0  # nobody held; raises it again
            assert view.max_offset("S", 0) == 3

    run(scenario)


def test_a_stream_silent_past_its_bound_is_dropped_and_reconnected(store_dir: Path) -> None:
    """Lines move the silence deadline on; none for `notice_silence_max_ms` ends the stream,
    and the next one is followed from its snapshot."""
    with MessageStore.open(store_dir, writer_config()) as writer:
        assert writer.put(Message("S", 0, b"a")).ok

    async def scenario() -> None:
        # Each stream talks for 0.6 s, twice the bound, a line every 0.1 s, then falls silent.
        talking = [{"type": "heartbeat"}] * 6
        fake = _fake_indexer([[{"type": "snapshot", "queues": [["S", 0, 0, 1]]}, *talking]],
                             line_gap_s=0.1)
        async with _served(fake) as url, notifier_app(store_dir, settings(
                indexer_url=url, refresh_interval_ms=3_600_000,
                notice_silence_max_ms=300)) as (client, app, _):
            await wait_until(lambda: len(fake[CONNECTIONS]) >= 2, timeout_s=10)
            # Every line of the first stream arrived: it was not cut while it talked.
            assert await metric(client, "mqstore_notices_received_total",
                                type="heartbeat") >= 6
            assert app[STATE].stream.connections_total >= 2

    run(scenario)


@contextlib.asynccontextmanager
async def _served(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


def test_shutdown_answers_held_pulls_at_once_and_holds_no_new_one(store_dir: Path) -> None:
    async def scenario() -> None:
        async with notifier_app(store_dir, settings()) as (client, app, _):
            pull = asyncio.create_task(client.get(PULL, params={"offset": "0",
                                                                "wait_ms": "30000"}))
            await wait_until(lambda: app[HELD].held_count == 1)
            await app.shutdown()  # what the runner does first on SIGTERM
            answer = await (await asyncio.wait_for(pull, 5)).json()
            assert (answer["status"], answer["messages"]) == ("NO_MESSAGE_IN_QUEUE", [])
            late = await asyncio.wait_for(client.get(PULL, params={
                "offset": "0", "wait_ms": "30000"}), 5)
            assert (await late.json())["status"] == "NO_MESSAGE_IN_QUEUE"
            assert await metric(client, "mqstore_pull_wakeups_total", cause="shutdown") == 2
            assert (await client.get("/readyz")).status == 503

    run(scenario)
