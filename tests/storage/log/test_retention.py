"""Retention: expired segments go, held ones stay until released, full disk refuses writes."""

from __future__ import annotations

import datetime
import errno
import os
import time
from pathlib import Path

import pytest

from mqstore.storage import ConfigError, GetStatus, Message, MessageStore, PutStatus
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files import index_file
from tests.conftest import SMALL_SEGMENT_BYTES, small_config
from tests.storage.dispatch import split_helpers

DAY_S = 24 * 3600
NOT_A_DELETE_HOUR = datetime.datetime(2026, 11, 21, 13, 0)
A_DELETE_HOUR = datetime.datetime(2026, 11, 21, 4, 0)


def _fill_segments(store: MessageStore, count: int) -> None:
    index = 0
    while store.segment_count < count or store.written_position % SMALL_SEGMENT_BYTES < 4096:
        store.put(Message("R", index % 2, b"r" * 3000, keys=(f"k{index}",)))
        index += 1
    _wait_dispatched(store)


def _wait_dispatched(store: MessageStore) -> None:
    deadline = time.monotonic() + 5
    while store.dispatch_behind_bytes and time.monotonic() < deadline:
        time.sleep(0.002)


def _age_all_segments(store_dir: Path, *, days: float) -> None:
    past = time.time() - days * DAY_S
    for path in (store_dir / "commitlog").iterdir():
        os.utime(path, (past, past))


def _config(**overrides: object) -> object:
    return small_config(clean_interval_ms=3_600_000, file_retention_hours=72,
                        flush_interval_ms=10, flush_pages_min=0, **overrides)


def test_expired_segments_go_at_the_delete_hour_and_queues_follow(store_dir: Path) -> None:
    with MessageStore.open(store_dir, _config()) as store:  # type: ignore[arg-type]
        _fill_segments(store, 5)
        store.put(Message("Late", 0, b"only in the last segment"))
        time.sleep(0.05)  # the async flush syncs every 10 ms: all but the tail on disk
        _age_all_segments(store_dir, days=4)
        # The machine's own disk may be over disk_max_used_ratio, which deletes at any hour.
        store._wiring.retention._disk_usage = lambda path: 0.40
        assert store._wiring.retention.clean(now=NOT_A_DELETE_HOUR) == []
        removed = store._wiring.retention.clean(now=A_DELETE_HOUR)
        assert len(removed) >= 3
        assert store.min_position == removed[-1].end_position
        for segment in removed:
            assert not segment.path.exists()
        assert store.min_offset("R", 0) > 0  # the consume queue's start moved
        with store.get("R", 0, 0, 1) as result:
            assert result.status is GetStatus.OFFSET_TOO_SMALL
            assert result.next_offset == store.min_offset("R", 0)
        assert [m.body for m in store.iter_messages()][-1] == b"only in the last segment"
        assert store.query_by_key("R", "k0") == []  # gone with its segment


def test_a_held_segment_stays_mapped_until_released(store_dir: Path) -> None:
    with MessageStore.open(store_dir, _config()) as store:  # type: ignore[arg-type]
        _fill_segments(store, 4)
        time.sleep(0.05)
        held = store.get("R", 0, 0, 4)
        assert held.status is GetStatus.FOUND
        first_body = bytes(held.messages[0].body)
        _age_all_segments(store_dir, days=4)
        removed = store._wiring.retention.clean(now=A_DELETE_HOUR)
        assert removed
        oldest = removed[0]
        assert oldest.path.exists(), "a segment a reader holds keeps its file"
        assert bytes(held.messages[0].body) == first_body  # and its mapping
        held.release()
        assert not oldest.path.exists()


def test_full_disk_refuses_writes_and_deletes_until_it_recovers(store_dir: Path) -> None:
    with MessageStore.open(store_dir, _config()) as store:  # type: ignore[arg-type]
        _fill_segments(store, 4)
        time.sleep(0.05)
        store._wiring.retention._disk_usage = lambda path: 0.95
        removed = store._wiring.retention.clean(now=NOT_A_DELETE_HOUR)
        assert removed, "above the force ratio, age does not matter"
        refused = store.put(Message("R", 0, b"no room"))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "disk 95% used" in refused.reason
        store._wiring.retention._disk_usage = lambda path: 0.40
        store._wiring.retention.clean(now=NOT_A_DELETE_HOUR)
        assert store.put(Message("R", 0, b"room again")).ok


def test_the_active_segment_is_never_deleted(store_dir: Path) -> None:
    with MessageStore.open(store_dir, _config()) as store:  # type: ignore[arg-type]
        store.put(Message("R", 0, b"alone"))
        time.sleep(0.05)
        store._wiring.retention._disk_usage = lambda path: 0.99
        assert store._wiring.retention.clean(now=A_DELETE_HOUR) == []
        assert store.segment_count == 1


@pytest.mark.parametrize("overrides", [
    {"disk_warning_ratio": 1.5},
    {"disk_clean_forcibly_ratio": 0.95, "disk_warning_ratio": 0.9},
    {"delete_hours": (25,)},
])
def test_bad_retention_settings(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        small_config(**overrides)


def _no_space(*args: object, **kwargs: object) -> object:
    raise OSError(errno.ENOSPC, "No space left on device")


def _put_until_segments(store: MessageStore, count: int) -> list[str]:
    keys = []
    while store.segment_count < count or store.written_position % SMALL_SEGMENT_BYTES < 4096:
        key = f"k{len(keys)}"
        assert store.put(Message("R", len(keys) % 2, b"r" * 3000, keys=(key,))).ok
        keys.append(key)
    return keys


def test_a_full_disk_stalls_dispatch_retention_keeps_what_it_lacks_and_it_resumes(
        store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC creating an index file stalls the embedded indexer; the disk is over the force
    ratio, yet retention deletes no segment dispatch has not passed; with room again
    dispatch resumes and every message is in its queue and the index."""
    config = _config(index_count_max=64, dispatch_retry_interval_ms=20)
    with MessageStore.open(store_dir, config) as store:  # type: ignore[arg-type]
        monkeypatch.setattr(index_file, "_prepare", _no_space)
        keys = _put_until_segments(store, 5)
        deadline = time.monotonic() + 10
        while store.dispatch_stalled_reason is None:
            assert time.monotonic() < deadline, "dispatch never stalled"
            time.sleep(0.005)
        assert "No space left on device" in store.dispatch_stalled_reason
        time.sleep(0.1)  # a few more retries
        stalled_at = store.dispatched_position
        assert stalled_at < SMALL_SEGMENT_BYTES, "stalled in the first segment"
        store._wiring.retention._disk_usage = lambda path: 0.99
        assert store._wiring.retention.clean(now=A_DELETE_HOUR) == []
        assert store.min_position == 0

        monkeypatch.undo()
        assert store.wait_dispatched(timeout_ms=20_000)
        assert store.dispatch_stalled_reason is None
        next_offsets = {0: 0, 1: 0}
        for index, key in enumerate(keys):
            queue_id = index % 2
            with store.get("R", queue_id, next_offsets[queue_id], 1) as result:
                assert result.status is GetStatus.FOUND, (key, result.status, result.reason)
                assert result.messages[0].keys == (key,)
            next_offsets[queue_id] += 1
            assert [m.keys for m in store.query_by_key("R", key)] == [(key,)]
        removed = store._wiring.retention.clean(now=A_DELETE_HOUR)
        assert removed, "dispatched now: the force ratio deletes"


def test_a_split_writer_keeps_every_segment_no_indexer_dispatched(store_dir: Path) -> None:
    """The writer of a split deployment, with no indexer process yet: `dispatched` says
    nothing was dispatched, so even a full disk deletes no segment (writes are refused
    instead); once an indexer dispatched them, they go."""
    writer = split_helpers.writer_config(clean_interval_ms=3_600_000, flush_interval_ms=10,
                                         flush_pages_min=0)
    with MessageStore.open(store_dir, writer) as store:
        _put_until_segments(store, 4)
        time.sleep(0.05)
        store._wiring.retention._disk_usage = lambda path: 0.99
        assert store._wiring.retention.clean(now=A_DELETE_HOUR) == []
        assert store.put(Message("R", 0, b"refused")).status is PutStatus.SERVICE_NOT_AVAILABLE
        with Indexer.open(store_dir, split_helpers.indexer_config()) as indexer:
            split_helpers.wait_dispatched(indexer, store.committed_position)
            indexer.sync(thorough=True)  # publishes `dispatched`
            removed = store._wiring.retention.clean(now=A_DELETE_HOUR)
            assert removed
            assert all(segment.end_position <= indexer.dispatched_position
                       for segment in removed)
