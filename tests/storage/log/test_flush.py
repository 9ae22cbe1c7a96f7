"""Flush services: group commit, sync timeout, async interval, and a failed sync."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from mqstore.storage import FlushMode, Message, MessageStore, PutResult, PutStatus
from mqstore.storage.files.lockfile import AbortMarker
from tests.conftest import small_config


def _wait_until(predicate: object, *, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.005)
    return False


@pytest.mark.parametrize("pool_enabled", [False, True])
def test_sync_flush_acknowledges_only_synced_records(store_dir: Path,
                                                     pool_enabled: bool) -> None:
    config = small_config(flush_mode=FlushMode.SYNC, pool_enabled=pool_enabled)
    with MessageStore.open(store_dir, config) as store:
        for index in range(50):
            result = store.put(Message("S", 0, b"%d" % index))
            assert result.status is PutStatus.PUT_OK
            assert store.flushed_position >= result.physical_offset + result.size_bytes
        results = store.put_batch([Message("S", 1, b"b" * 100) for _ in range(30)])
        assert store.flushed_position >= results[-1].physical_offset + results[-1].size_bytes


def test_group_commit_serves_concurrent_producers(store_dir: Path) -> None:
    config = small_config(flush_mode=FlushMode.SYNC)
    fdatasync_calls = 0
    real_fdatasync = os.fdatasync

    def counting_fdatasync(fd: int) -> None:
        nonlocal fdatasync_calls
        fdatasync_calls += 1
        real_fdatasync(fd)

    with MessageStore.open(store_dir, config) as store:
        os.fdatasync = counting_fdatasync  # type: ignore[assignment]
        try:
            def produce(queue_id: int) -> None:
                for _ in range(50):
                    assert store.put(Message("G", queue_id, b"x" * 64)).ok

            threads = [threading.Thread(target=produce, args=(q,)) for q in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            os.fdatasync = real_fdatasync
        assert all(store.next_queue_offset("G", q) == 50 for q in range(16))
    assert fdatasync_calls < 16 * 50, "group commit must share syncs between producers"


def test_sync_flush_timeout(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = small_config(flush_mode=FlushMode.SYNC, sync_flush_timeout_ms=50)
    release = threading.Event()
    real_fdatasync = os.fdatasync
    with MessageStore.open(store_dir, config) as store:
        assert store.put(Message("S", 0, b"first")).ok  # the segment exists before the stall

        def slow_fdatasync(fd: int) -> None:
            release.wait(5)
            real_fdatasync(fd)

        monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
        result = store.put(Message("S", 0, b"slow"))
        assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert "sync_flush_timeout_ms" in result.reason
        assert result.physical_offset > 0  # it was written; only the sync is not confirmed
        release.set()


def test_async_flush_syncs_within_the_interval(store_dir: Path) -> None:
    config = small_config(flush_interval_ms=20, flush_pages_min=0)
    with MessageStore.open(store_dir, config) as store:
        result = store.put(Message("A", 0, b"async"))
        assert result.ok
        assert _wait_until(lambda: store.flushed_position >= result.size_bytes)


@pytest.mark.parametrize("flush_mode", [FlushMode.SYNC, FlushMode.ASYNC])
def test_a_failed_sync_stops_the_store(store_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                       flush_mode: FlushMode) -> None:
    config = small_config(flush_mode=flush_mode, flush_interval_ms=10, flush_pages_min=0)
    store = MessageStore.open(store_dir, config)
    assert store.put(Message("F", 0, b"before")).ok

    def failing_fdatasync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
    during = store.put(Message("F", 0, b"during"))
    if flush_mode is FlushMode.SYNC:
        assert during.status is PutStatus.FLUSH_DISK_TIMEOUT
    assert _wait_until(lambda: store.failure is not None)
    assert "Input/output error" in (store.failure or "")
    refused = store.put(Message("F", 0, b"after"))
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "store stopped" in refused.reason
    monkeypatch.undo()
    store.close()
    assert AbortMarker(store_dir / "abort").present, "a failed store must reopen as unclean"


def test_submit_completes_after_the_sync_and_bridges_to_asyncio(store_dir: Path) -> None:
    config = small_config(flush_mode=FlushMode.SYNC)
    with MessageStore.open(store_dir, config) as store:
        async def produce(queue_id: int) -> list[int]:
            offsets = []
            for index in range(20):
                result = await asyncio.wrap_future(store.submit(Message("A", queue_id, b"%d"
                                                                        % index)))
                assert result.status is PutStatus.PUT_OK
                assert store.flushed_position >= result.physical_offset + result.size_bytes
                offsets.append(result.queue_offset)
            batch = await asyncio.wrap_future(store.submit_batch(
                [Message("A", queue_id, b"b")] * 3))
            offsets.extend(r.queue_offset for r in batch)
            return offsets

        async def main() -> list[list[int]]:
            return await asyncio.gather(*(produce(q) for q in range(8)))

        assert asyncio.run(main()) == [list(range(23))] * 8


def test_put_callback_runs_after_the_sync_or_at_once_when_nothing_waits(
        store_dir: Path, tmp_path: Path) -> None:
    """Sync flush: the callback runs on the group commit's thread, after the sync, with the
    put's result; async flush: before `put_callback` returns."""
    with MessageStore.open(store_dir, small_config(flush_mode=FlushMode.SYNC)) as store:
        seen: list[tuple[object, int, str]] = []
        done = threading.Event()

        def on_done(result: object) -> None:
            seen.append((result, store.flushed_position, threading.current_thread().name))
            done.set()

        store.put_callback(Message("C", 0, b"one"), on_done)
        assert done.wait(5)
        (result, flushed, thread_name), = seen
        assert isinstance(result, PutResult) and result.status is PutStatus.PUT_OK
        assert flushed >= result.physical_offset + result.size_bytes
        assert thread_name != threading.current_thread().name
        batches: list[list[PutResult]] = []
        store.put_batch_callback([Message("C", 0, b"two")] * 3, batches.append)
        assert _wait_until(lambda: batches)
        assert [r.queue_offset for r in batches[0]] == [1, 2, 3]
    with MessageStore.open(tmp_path / "async", small_config()) as store:
        answers: list[PutResult] = []
        store.put_callback(Message("C", 0, b"now"), answers.append)
        assert [r.status for r in answers] == [PutStatus.PUT_OK]


def test_submit_times_out_with_flush_disk_timeout(store_dir: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    config = small_config(flush_mode=FlushMode.SYNC, sync_flush_timeout_ms=30)
    release = threading.Event()
    real_fdatasync = os.fdatasync
    with MessageStore.open(store_dir, config) as store:
        assert store.put(Message("S", 0, b"first")).ok
        monkeypatch.setattr(os, "fdatasync", lambda fd: (release.wait(5), real_fdatasync(fd)))
        blocked = store.submit(Message("S", 0, b"slow"))
        second = store.submit(Message("S", 0, b"slow too"))
        time.sleep(0.1)
        release.set()
        assert blocked.result(5).status is PutStatus.FLUSH_DISK_TIMEOUT
        assert second.result(5).status is PutStatus.FLUSH_DISK_TIMEOUT
        assert "sync_flush_timeout_ms" in second.result().reason
