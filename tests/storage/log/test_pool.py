"""The transient store pool: visibility, buffer return, back-pressure."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mqstore.storage import BufferPoolExhausted, Message, MessageStore, PutStatus
from mqstore.storage.files.segment import CommitLogSegment
from mqstore.storage.log.pool import TransientStorePool
from tests.conftest import SMALL_SEGMENT_BYTES, small_config

NEVER_MS = 3_600_000
"""A commit threshold no test reaches: the commit service then only commits when told."""


def _paused_pool_config(**overrides: object) -> object:
    return small_config(pool_enabled=True, commit_pages_min=10_000,
                        commit_thorough_interval_ms=NEVER_MS, commit_interval_ms=NEVER_MS,
                        **overrides)


def test_borrow_waits_then_raises_and_counts_free() -> None:
    pool = TransientStorePool(buffer_count=2, buffer_size_bytes=4096, lock_memory=False)
    first = pool.borrow(timeout_ms=0)
    pool.borrow(timeout_ms=0)
    assert pool.free_count == 0
    started = time.monotonic()
    with pytest.raises(BufferPoolExhausted, match="all 2 transient store pool buffers"):
        pool.borrow(timeout_ms=50)
    assert time.monotonic() - started >= 0.04
    pool.give_back(first)
    assert pool.free_count == 1
    assert pool.borrow(timeout_ms=0) is first
    pool.close()


def test_readers_never_see_uncommitted_bytes(store_dir: Path) -> None:
    with MessageStore.open(store_dir, _paused_pool_config()) as store:  # type: ignore[arg-type]
        result = store.put(Message("T", 0, b"pooled"))
        assert result.ok
        assert store.written_position == result.size_bytes
        assert store.committed_position == 0
        assert list(store.iter_messages()) == []
        assert store.pool_free_count == store.config.pool_buffer_count - 1
        store._wiring.commit_service.commit_now()  # type: ignore[union-attr]
        assert store.committed_position == result.size_bytes
        assert store.message_at(0).body == b"pooled"
    with MessageStore.open(store_dir, small_config()) as reopened:
        assert [m.body for m in reopened.iter_messages()] == [b"pooled"]


def test_buffer_returns_when_its_segment_is_fully_committed(store_dir: Path) -> None:
    config = small_config(pool_enabled=True, pool_buffer_count=2)
    with MessageStore.open(store_dir, config) as store:
        while store.written_position < 3 * SMALL_SEGMENT_BYTES:
            assert store.put(Message("T", 0, b"x" * 3000)).ok
        deadline = time.monotonic() + 5
        while store.committed_position < store.written_position and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.committed_position == store.written_position
        assert store.pool_free_count == 1  # only the active segment holds one


def test_exhausted_pool_is_back_pressure_not_a_hang(store_dir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A stalled commit (a slow disk) keeps every buffer out: puts that need a new segment
    get OS_PAGECACHE_BUSY within the borrow bound, and succeed once commit catches up."""
    disk_stalled = threading.Event()
    disk_stalled.set()
    resumed = threading.Event()
    original_commit = CommitLogSegment.commit

    def stalled_commit(segment: CommitLogSegment, *, pages_min: int) -> object:
        if disk_stalled.is_set():
            resumed.wait(10)
        return original_commit(segment, pages_min=pages_min)

    monkeypatch.setattr(CommitLogSegment, "commit", stalled_commit)
    config = small_config(pool_enabled=True, pool_buffer_count=1, pool_borrow_timeout_ms=20)
    with MessageStore.open(store_dir, config) as store:
        results = []
        for _ in range(40):
            results.append(store.put(Message("T", 0, b"y" * 3000)))
            if not results[-1].ok:
                break
        refused = results[-1]
        assert refused.status is PutStatus.OS_PAGECACHE_BUSY
        assert "transient store pool" in refused.reason
        assert store.pool_free_count == 0
        disk_stalled.clear()
        resumed.set()
        deadline = time.monotonic() + 5
        while store.pool_free_count == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        after = store.put(Message("T", 0, b"z" * 3000))
        assert after.ok
        assert after.physical_offset == SMALL_SEGMENT_BYTES
        assert after.queue_offset == len(results) - 1  # the refused put took no offset


def test_readable_end_stops_at_uncommitted_bytes_across_a_roll(
        store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full segment can still hold uncommitted bytes after the next one started: readers
    (dispatch) must not be told its file is readable past what was committed."""
    resumed = threading.Event()
    original_commit = CommitLogSegment.commit

    def stalled_commit(segment: CommitLogSegment, *, pages_min: int) -> object:
        resumed.wait(10)
        return original_commit(segment, pages_min=pages_min)

    monkeypatch.setattr(CommitLogSegment, "commit", stalled_commit)
    with MessageStore.open(store_dir, small_config(pool_enabled=True)) as store:
        while store.segment_count < 2 or store.written_position < SMALL_SEGMENT_BYTES + 4000:
            assert store.put(Message("T", 0, b"x" * 3000)).ok
        assert store.committed_position == 0
        time.sleep(0.05)  # dispatch polls every millisecond meanwhile
        assert store.failure is None
        resumed.set()
        deadline = time.monotonic() + 5
        while store.committed_position < store.written_position and time.monotonic() < deadline:
            time.sleep(0.005)
        assert store.committed_position == store.written_position
        assert store.failure is None
