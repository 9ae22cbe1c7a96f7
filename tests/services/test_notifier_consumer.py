"""`mqstore.client.Consumer` and `AsyncConsumer` against the notifier: poll, commit, redelivery
of what was not committed, retries on 503 and lost connections, clear errors."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from mqstore.client import AsyncConsumer, BadRequestError, Consumer, UnavailableError
from mqstore.services.notifier import create_app
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView
from tests.services.notifier_stack import notifier_app, settings, view_config
from tests.services.serving import app_on_thread, run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

FAST = {"retries_max": 2, "backoff_initial_ms": 1, "backoff_max_ms": 5}


@contextlib.contextmanager
def _writing(store_dir: Path) -> Iterator[tuple[MessageStore, Indexer]]:
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        yield writer, indexer


@contextlib.contextmanager
def _notifier_on_thread(store_dir: Path) -> Iterator[str]:
    view = StoreView.open(store_dir, view_config())
    try:
        offsets = ConsumerOffsets(store_dir, lock_timeout_ms=5000)
        with app_on_thread(create_app(view, offsets, settings())) as url:
            yield url
    finally:
        view.close()


def _produce(writer: MessageStore, indexer: Indexer, count: int, *, first: int = 0) -> None:
    for n in range(first, first + count):
        assert writer.put(Message("Orders", n % 4, f"m{n}".encode(), tags="t")).ok
    wait_dispatched(indexer, writer.committed_position)


def _drain(consumer: Consumer, count: int) -> list[bytes]:
    bodies: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(bodies) < count:
        assert time.monotonic() < deadline, f"only {len(bodies)} of {count} arrived"
        bodies += [message.body for message in consumer.poll(max_messages=8, wait_ms=1000)]
    return bodies


def test_a_consumer_polls_commits_and_its_group_resumes(store_dir: Path) -> None:
    with _writing(store_dir) as (writer, indexer), _notifier_on_thread(store_dir) as url:
        _produce(writer, indexer, 50)
        with Consumer(url, "billing", "Orders") as consumer:
            bodies = _drain(consumer, 50)
            assert sorted(bodies) == sorted(f"m{n}".encode() for n in range(50))
            assert consumer.positions == {0: 13, 1: 13, 2: 12, 3: 12}
            consumer.commit()
        with Consumer(url, "billing", "Orders") as resumed:
            assert resumed.poll(wait_ms=100) == []
            _produce(writer, indexer, 4, first=50)
            assert sorted(_drain(resumed, 4)) == [b"m50", b"m51", b"m52", b"m53"]
        with Consumer(url, "audit", "Orders") as other_group:
            assert len(_drain(other_group, 54)) == 54


def test_what_was_polled_but_not_committed_is_delivered_again(store_dir: Path) -> None:
    with _writing(store_dir) as (writer, indexer), _notifier_on_thread(store_dir) as url:
        _produce(writer, indexer, 12)
        with Consumer(url, "g", "Orders") as first:
            seen = _drain(first, 12)
            # no commit: a crash here loses nothing
        with Consumer(url, "g", "Orders") as second:
            assert sorted(_drain(second, 12)) == sorted(seen)
            second.commit()
        with Consumer(url, "g", "Orders") as third:
            assert third.poll(wait_ms=50) == []


def test_an_async_consumer_long_polls_and_commits(store_dir: Path) -> None:
    with _writing(store_dir) as (writer, indexer):
        _produce(writer, indexer, 8)

        async def scenario() -> None:
            async with notifier_app(store_dir, settings()) as (client, _, _):
                url = str(client.make_url("")).rstrip("/")
                async with AsyncConsumer(url, "g", "Orders", tags=["t"]) as consumer:
                    got: list[bytes] = []
                    while len(got) < 8:  # the view may learn of them in steps
                        got += [m.body for m in await consumer.poll(max_messages=100,
                                                                    wait_ms=2000)]
                    assert sorted(got) == sorted(f"m{n}".encode() for n in range(8))
                    late = asyncio.create_task(consumer.poll(max_messages=100,
                                                             wait_ms=20_000))
                    await asyncio.sleep(0.2)
                    assert not late.done()
                    assert writer.put(Message("Orders", 2, b"late", tags="t")).ok
                    assert [m.body for m in await asyncio.wait_for(late, 10)] == [b"late"]
                    await consumer.commit()
                    stored = await (await client.get("/v1/groups/g/offsets",
                                                     params={"topic": "Orders"})).json()
                    assert stored["offsets"] == {"0": 2, "1": 2, "2": 3, "3": 2}

        run(scenario)


def _flaky_notifier(answers: list[tuple[int, dict[str, Any]]]) -> tuple[web.Application,
                                                                        list[str]]:
    """Answers each request with the next (status, body) of `answers` (the last repeats)."""
    seen: list[str] = []

    async def any_request(request: web.Request) -> web.Response:
        seen.append(request.path)
        status, body = answers[min(len(seen), len(answers)) - 1]
        return web.json_response(body, status=status, headers={"Retry-After": "0"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", any_request)
    return app, seen


BUSY = (503, {"error": {"status": "BUSY", "reason": "too many held pulls"}})
ONE = (200, {"group": "g", "topic": "T", "next_offsets": {"0": 1}, "messages": [{
    "topic": "T", "queue_id": 0, "queue_offset": 0, "physical_offset": 0, "msg_id": "00",
    "store_timestamp_ms": 1, "born_timestamp_ms": 1, "tags": None, "keys": [],
    "properties": {}, "body_base64": "aGk="}]})


def test_503_is_retried_then_the_poll_succeeds() -> None:
    app, seen = _flaky_notifier([BUSY, BUSY, ONE])
    with app_on_thread(app) as url, Consumer(url, "g", "T", **FAST) as consumer:
        assert [m.body for m in consumer.poll(wait_ms=0)] == [b"hi"]
    assert len(seen) == 3


def test_503_after_every_retry_raises_unavailable() -> None:
    app, seen = _flaky_notifier([BUSY])
    with app_on_thread(app) as url, Consumer(url, "g", "T", **FAST) as consumer, \
            pytest.raises(UnavailableError) as raised:
        consumer.poll(wait_ms=0)
    assert raised.value.http_status == 503
    assert len(seen) == 3


def test_a_bad_request_is_not_retried() -> None:
    app, seen = _flaky_notifier([(400, {"error": {"status": "BAD_REQUEST",
                                                  "reason": "group name rules"}})])
    with app_on_thread(app) as url, Consumer(url, "g", "T", **FAST) as consumer, \
            pytest.raises(BadRequestError, match="group name rules"):
        consumer.poll(wait_ms=0)
    assert len(seen) == 1


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_no_server_raises_unavailable_after_the_retries() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with Consumer(url, "g", "T", **FAST) as consumer, \
            pytest.raises(UnavailableError, match="3 attempts"):
        consumer.poll(wait_ms=0)

    async def scenario() -> None:
        async with AsyncConsumer(url, "g", "T", **FAST) as consumer:
            with pytest.raises(UnavailableError, match="3 attempts"):
                await consumer.poll(wait_ms=0)

    run(scenario)


def test_the_async_consumer_retries_503_too() -> None:
    app, seen = _flaky_notifier([BUSY, ONE])
    with app_on_thread(app) as url:
        async def scenario() -> list[bytes]:
            async with AsyncConsumer(url, "g", "T", **FAST) as consumer:
                return [m.body for m in await consumer.poll(wait_ms=0)]

        assert run(scenario) == [b"hi"]
    assert len(seen) == 2
