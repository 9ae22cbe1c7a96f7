"""mqstore.client against a real writer app: sends, retries on 503, errors, backoff."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

import mqstore.client.async_producer
import mqstore.client.connection
from mqstore.client import (
    AsyncProducer,
    BadRequestError,
    Consumer,
    DiskFullError,
    OutgoingMessage,
    Producer,
    UnavailableError,
)
from mqstore.client.backoff import Backoff
from mqstore.client.consumer_calls import Request
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.storage import MessageStore
from mqstore.storage.files.segment import CommitLogSegment
from tests.conftest import small_config
from tests.services.serving import app_on_thread, run

BIG = b"y" * 3000


@pytest.fixture
def writer_url(store: MessageStore) -> Iterator[str]:
    with app_on_thread(create_app(store, WriterSettings())) as url:
        yield url


def test_send_and_send_batch(store: MessageStore, writer_url: str) -> None:
    with Producer(writer_url) as producer:
        one = producer.send("Orders", b"\x00binary", queue_id=1, tags="t", keys=("k1",),
                            properties={"p": "v"})
        text = producer.send("Or%ders", "text ✓")
        batch = producer.send_batch([OutgoingMessage("A", b"a"),
                                     OutgoingMessage("B", b"b", queue_id=3, keys=("x",))])
    assert one.ok
    stored = store.message_at(one.physical_offset)
    assert (stored.topic, stored.queue_id, bytes(stored.body)) == ("Orders", 1, b"\x00binary")
    assert (stored.tags, stored.keys, stored.properties["p"]) == ("t", ("k1",), "v")
    assert stored.msg_id == one.msg_id
    assert bytes(store.message_at(text.physical_offset).body) == "text ✓".encode()
    assert store.message_at(text.physical_offset).topic == "Or%ders"
    assert [r.queue_id for r in batch] == [0, 3]
    for result, body in zip(batch, (b"a", b"b"), strict=True):
        assert result.ok
        assert bytes(store.message_at(result.physical_offset).body) == body
        assert store.message_at(result.physical_offset).msg_id == result.msg_id


def test_bad_request_raises_at_once(writer_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(mqstore.client.connection, "_sleep", sleeps.append)
    with Producer(writer_url) as producer, pytest.raises(BadRequestError) as error:
        producer.send("bad topic", b"x")
    assert (error.value.http_status, error.value.status) == (400, "MESSAGE_ILLEGAL")
    assert "illegal character" in error.value.reason
    assert sleeps == []  # never retried


def test_503_is_retried_after_retry_after_then_succeeds(store_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool is exhausted while the commit service stalls: the first send gets 503 with
    Retry-After; during the backoff the disk "recovers"; the retry is stored."""
    resume = threading.Event()
    original = CommitLogSegment.commit

    def stalled_commit(segment: CommitLogSegment, *, pages_min: int) -> object:
        resume.wait(10)
        return original(segment, pages_min=pages_min)

    monkeypatch.setattr(CommitLogSegment, "commit", stalled_commit)
    config = small_config(pool_enabled=True, pool_buffer_count=1, pool_borrow_timeout_ms=0)
    sleeps: list[float] = []
    with MessageStore.open(store_dir, config) as store:
        def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            resume.set()
            deadline = time.monotonic() + 5
            while store.pool_free_count == 0 and time.monotonic() < deadline:
                time.sleep(0.001)

        monkeypatch.setattr(mqstore.client.connection, "_sleep", sleep)
        settings = WriterSettings(retry_after_s=1)
        with app_on_thread(create_app(store, settings)) as url, Producer(url) as producer:
            results = [producer.send("P", BIG, queue_id=0) for _ in range(30)]
        assert all(result.ok for result in results)
        assert len(sleeps) == 1
        assert sleeps[0] >= 1.0  # Retry-After is a floor under the jittered backoff
        assert [r.queue_offset for r in results] == list(range(30))


def test_connection_failures_are_retried_then_unavailable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps: list[float] = []
    monkeypatch.setattr(mqstore.client.connection, "_sleep", sleeps.append)
    with Producer(f"http://127.0.0.1:{port}", retries_max=2) as producer, \
            pytest.raises(UnavailableError, match="no answer after 3 attempts") as error:
        producer.send("T", b"x")
    assert isinstance(error.value.__cause__, ConnectionRefusedError)
    assert len(sleeps) == 2


def test_full_disk_raises_disk_full(store_dir: Path) -> None:
    config = small_config(disk_max_used_ratio=0.01, disk_clean_forcibly_ratio=0.01,
                          disk_warning_ratio=0.01, clean_interval_ms=5)
    with MessageStore.open(store_dir, config) as store, \
            app_on_thread(create_app(store, WriterSettings())) as url, \
            Producer(url) as producer, pytest.raises(DiskFullError) as error:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            producer.send("D", BIG)
    assert error.value.http_status == 507


def test_async_producer(store: MessageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []

    async def no_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    monkeypatch.setattr(mqstore.client.async_producer, "_sleep", no_sleep)

    async def scenario() -> None:
        async with TestServer(create_app(store, WriterSettings())) as server, \
                AsyncProducer(str(server.make_url(""))) as producer:
            one = await producer.send("T", b"one", keys=("k",))
            many = await producer.send_batch([OutgoingMessage("T", b"m")] * 3)
            with pytest.raises(BadRequestError, match="queue_id=99"):
                await producer.send("T", b"x", queue_id=99)
        assert bytes(store.message_at(one.physical_offset).body) == b"one"
        assert [r.queue_offset for r in many] == [0, 1, 2]
        assert many[0].queue_id == 1  # round robin: the single send took queue 0

    run(scenario)
    assert sleeps == []


def test_backoff_is_jittered_exponential_and_honours_retry_after() -> None:
    backoff = Backoff(retries_max=5, initial_ms=100, max_ms=1000, rng=random.Random(7))
    for attempt, ceiling in enumerate((0.1, 0.2, 0.4, 0.8, 1.0, 1.0)):
        draws = [backoff.delay_s(attempt) for _ in range(200)]
        assert all(0 <= draw <= ceiling for draw in draws)
        assert max(draws) > ceiling / 2  # spread, not a constant
    assert backoff.delay_s(0, retry_after_s=3.0) == 3.0
    with pytest.raises(ValueError, match="backoff_initial_ms"):
        Backoff(retries_max=1, initial_ms=0, max_ms=10)


def test_a_poll_asks_for_exactly_the_wait_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--wait-ms 99999999` was sent (and refused) as 99999998: the first poll asks for the
    caller's wait itself, not what remains of it a moment later."""
    sent: list[bytes | None] = []

    class Sent(Exception):
        pass

    def call(self: Consumer, request: Request, *, wait_ms: int) -> dict[str, object]:
        sent.append(request.body)
        raise Sent

    monkeypatch.setattr(Consumer, "_call", call)
    with Consumer("http://127.0.0.1:9", "g", "T", poll_retries=False) as consumer, \
            pytest.raises(Sent):
        consumer.poll(max_messages=1, wait_ms=99_999_999)
    assert sent[0] is not None
    assert b'"wait_ms": 99999999' in sent[0]
