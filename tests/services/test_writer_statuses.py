"""Put statuses to HTTP: back-pressure 503 with Retry-After, full disk 507, unsynced 202."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.statuses import refusal
from mqstore.storage import FlushMode, Message, MessageStore, PutResult, PutStatus
from mqstore.storage.files.segment import CommitLogSegment
from tests.conftest import small_config
from tests.services.serving import run, writer_client

BODY = {"body": "y" * 3000}


@pytest.fixture
def stalled_commit(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The commit service stalls (a slow disk) until the yielded event is set, so a full
    segment's pool buffer is not given back."""
    resume = threading.Event()
    original = CommitLogSegment.commit

    def commit(segment: CommitLogSegment, *, pages_min: int) -> object:
        resume.wait(10)
        return original(segment, pages_min=pages_min)

    monkeypatch.setattr(CommitLogSegment, "commit", commit)
    yield resume
    resume.set()


def test_exhausted_pool_is_503_with_retry_after_and_writes_nothing(
        store_dir: Path, stalled_commit: threading.Event) -> None:
    config = small_config(pool_enabled=True, pool_buffer_count=1, pool_borrow_timeout_ms=0)
    settings = WriterSettings(retry_after_s=2)
    with MessageStore.open(store_dir, config) as store:
        async def scenario() -> tuple[int, str, dict[str, dict[str, str]], int]:
            async with writer_client(store, settings) as client:
                for _ in range(100):  # fills the one pooled segment, then needs a second
                    response = await client.post("/v1/topics/P/messages", json=BODY)
                    if response.status != 200:
                        break
                wrote = store.written_position
                return (response.status, response.headers.get("Retry-After", ""),
                        await response.json(), wrote)

        status, retry_after, answer, wrote = run(scenario)
        assert (status, retry_after) == (503, "2")
        assert answer["error"]["status"] == "OS_PAGECACHE_BUSY"
        assert "transient store pool" in answer["error"]["reason"]
        assert store.written_position == wrote
        stalled_commit.set()


def test_full_disk_is_507(store_dir: Path) -> None:
    # Retention refuses writes above disk_warning_ratio: 1% is below any real volume's use.
    config = small_config(disk_max_used_ratio=0.01, disk_clean_forcibly_ratio=0.01,
                          disk_warning_ratio=0.01, clean_interval_ms=5)
    with MessageStore.open(store_dir, config) as store:
        async def scenario() -> tuple[int, dict[str, dict[str, str]]]:
            async with writer_client(store) as client:
                deadline = time.monotonic() + 5
                while True:
                    response = await client.post("/v1/topics/D/messages", json=BODY)
                    if response.status != 200 or time.monotonic() > deadline:
                        return response.status, await response.json()

        status, answer = run(scenario)
        assert status == 507
        assert answer["error"]["status"] == "SERVICE_NOT_AVAILABLE"
        assert "disk_warning_ratio" in answer["error"]["reason"]


def test_unconfirmed_sync_is_202_and_says_so(store_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """FLUSH_DISK_TIMEOUT as the acknowledger reports it: written, sync not seen in time."""
    with MessageStore.open(store_dir, small_config(flush_mode=FlushMode.SYNC)) as store:
        put_callback = store.put_callback

        def late_put(message: Message, callback: Callable[[PutResult], None]) -> None:
            def mark_late(result: PutResult) -> None:
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
                result.reason = "not synced within 5000 ms (sync_flush_timeout_ms)"
                callback(result)

            put_callback(message, mark_late)

        monkeypatch.setattr(store, "put_callback", late_put)

        async def scenario() -> tuple[int, dict[str, object]]:
            async with writer_client(store) as client:
                response = await client.post("/v1/topics/S/messages", json={"body": "x"})
                return response.status, await response.json()

        status, answer = run(scenario)
        assert status == 202
        assert answer["status"] == "FLUSH_DISK_TIMEOUT"
        assert "durability NOT confirmed" in str(answer["reason"])
        assert bytes(store.message_at(int(str(answer["physical_offset"]))).body) == b"x"


def test_failed_sync_makes_puts_and_readiness_503(store_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = MessageStore.open(store_dir, small_config(flush_interval_ms=5, flush_pages_min=0))

    def failing_fdatasync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    try:
        assert store.put(Message("F", 0, b"synced")).ok  # the first segment is made first
        monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
        assert store.put(Message("F", 0, b"unsynced")).ok
        deadline = time.monotonic() + 5
        while store.failure is None and time.monotonic() < deadline:
            time.sleep(0.005)

        async def scenario() -> tuple[int, dict[str, dict[str, str]], int]:
            async with writer_client(store) as client:
                response = await client.post("/v1/topics/F/messages", json={"body": "x"})
                ready = await client.get("/readyz")
                return response.status, await response.json(), ready.status

        status, answer, ready = run(scenario)
        assert (status, ready) == (503, 503)
        assert "Input/output error" in answer["error"]["reason"]
    finally:
        monkeypatch.undo()
        store.close()


@pytest.mark.parametrize(("status", "closed", "http_status"), [
    (PutStatus.MESSAGE_ILLEGAL, False, 400),
    (PutStatus.OS_PAGECACHE_BUSY, False, 503),
    (PutStatus.SERVICE_NOT_AVAILABLE, False, 507),
    (PutStatus.SERVICE_NOT_AVAILABLE, True, 503),
    (PutStatus.CREATE_MAPPED_FILE_FAILED, False, 500),
])
def test_refusal_table(store_dir: Path, status: PutStatus, closed: bool,
                       http_status: int) -> None:
    store = MessageStore.open(store_dir, small_config())
    if closed:
        store.close()
    error = refusal(status, "why", store=store, retry_after_s=1)
    store.close()
    assert (error.http_status, error.status, error.reason) == (http_status, status.value, "why")
    assert ("Retry-After" in error.headers) == (http_status == 503)


def test_past_the_in_flight_limit_a_put_is_503_system_busy_and_stores_nothing(
        store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sync flush with a stalled disk: the first put waits for its sync, holding the only
    admission; the next is refused at once, before its body is read."""
    settings = WriterSettings(put_requests_in_flight_max=1, retry_after_s=3)
    release = threading.Event()
    real_fdatasync = os.fdatasync
    with MessageStore.open(store_dir, small_config(flush_mode=FlushMode.SYNC)) as store:
        # The allocator makes the first segment in the background after open, and syncs it:
        # stalled there, the first put would wait for a segment (and fail after
        # allocate_wait_ms) instead of for its own sync.  So one put takes it first.
        assert store.put(Message("B", 0, b"warm")).ok
        before = store.written_position
        monkeypatch.setattr(os, "fdatasync", lambda fd: (release.wait(10), real_fdatasync(fd)))

        async def scenario() -> tuple[int, str, dict[str, dict[str, str]], int, int, str]:
            async with writer_client(store, settings) as client:
                first = asyncio.ensure_future(client.post("/v1/topics/B/messages", json=BODY))
                while store.written_position == before:  # the first put is in and waits
                    await asyncio.sleep(0.01)
                wrote = store.written_position
                second = await client.post("/v1/topics/B/messages", json=BODY)
                answer = await second.json()
                stored_meanwhile = store.written_position - wrote
                metrics = await (await client.get("/metrics")).text()
                release.set()
                return (second.status, second.headers.get("Retry-After", ""), answer,
                        stored_meanwhile, (await first).status, metrics)

        status, retry_after, answer, stored_meanwhile, first_status, metrics = run(scenario)
    assert "mqstore_put_requests_in_flight 1.0" in metrics
    assert "mqstore_put_requests_refused_busy_total 1.0" in metrics
    assert (status, retry_after) == (503, "3")
    assert answer["error"]["status"] == "SYSTEM_BUSY"
    assert "put_requests_in_flight_max" in answer["error"]["reason"]
    assert stored_meanwhile == 0
    assert first_status == 200
