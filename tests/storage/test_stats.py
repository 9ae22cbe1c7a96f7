"""`MessageStore.stats`: the engine's running totals count what happened, nothing more."""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore, RecoveryMode, StoreStats
from tests.conftest import SMALL_SEGMENT_BYTES, small_config

A_DELETE_HOUR = datetime.datetime(2026, 11, 21, 4, 0)


def _config(**overrides: object) -> object:
    return small_config(clean_interval_ms=3_600_000, flush_interval_ms=10, flush_pages_min=0,
                        **overrides)


def _fill(store: MessageStore, segments: int) -> None:
    index = 0
    while store.segment_count < segments or store.written_position % SMALL_SEGMENT_BYTES < 4096:
        assert store.put(Message("S", index % 2, b"s" * 3000)).ok
        index += 1


def _wait(condition: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.005)


def test_a_fresh_store_counts_nothing_but_its_first_segment(store_dir: Path) -> None:
    with MessageStore.open(store_dir, _config()) as store:  # type: ignore[arg-type]
        stats = store.stats
        assert stats.recovery_mode is RecoveryMode.EMPTY
        assert stats.recovery_truncated_bytes == 0
        assert stats.retention_deleted_segments_total == 0
        assert stats.retention_deleted_bytes_total == 0
        assert stats.flush_syncs_total == 0
        # Open prepares the first segment (and the allocator may run ahead).
        assert stats.segments_preallocated_total <= 1 + store.config.preallocate_ahead_count


def test_preallocations_and_syncs_follow_the_segments_written(store_dir: Path) -> None:
    with MessageStore.open(store_dir, _config()) as store:  # type: ignore[arg-type]
        _fill(store, 4)
        _wait(lambda: store.flushed_position >= store.written_position - 4096)
        stats = store.stats
        assert stats.segments_preallocated_total >= store.segment_count
        assert stats.segments_preallocated_total <= (store.segment_count
                                                     + store.config.preallocate_ahead_count)
        assert stats.preallocation_seconds_total > 0
        # At least one sync per full segment (a sync never spans two segments).
        assert stats.flush_syncs_total >= store.segment_count - 1


def test_retention_counts_the_segments_and_bytes_it_deletes(store_dir: Path) -> None:
    with MessageStore.open(store_dir, _config()) as store:  # type: ignore[arg-type]
        _fill(store, 5)
        time.sleep(0.05)  # the 10 ms flush syncs all but the tail
        past = time.time() - 4 * 24 * 3600
        for path in (store_dir / "commitlog").iterdir():
            os.utime(path, (past, past))
        removed = store._wiring.retention.clean(now=A_DELETE_HOUR)
        assert removed
        stats = store.stats
        assert stats.retention_deleted_segments_total == len(removed)
        assert stats.retention_deleted_bytes_total == len(removed) * SMALL_SEGMENT_BYTES


def test_recovery_mode_and_truncated_bytes_are_this_opens(store_dir: Path) -> None:
    with MessageStore.open(store_dir, _config()) as store:  # type: ignore[arg-type]
        last = store.put(Message("S", 0, b"t" * 700))
    with MessageStore.open(store_dir, _config()) as store:  # type: ignore[arg-type]
        assert store.stats.recovery_mode is RecoveryMode.NORMAL
    segment = store_dir / "commitlog" / f"{0:020d}"
    with segment.open("r+b") as file:  # tear the last record: 100 bytes survive
        file.seek(last.physical_offset + 100)
        file.write(bytes(last.size_bytes - 100))
    (store_dir / "abort").touch()
    with MessageStore.open(store_dir, _config()) as store:  # type: ignore[arg-type]
        stats = store.stats
        assert stats.recovery_mode is RecoveryMode.ABNORMAL
        assert stats.recovery_truncated_bytes == 100


@pytest.mark.parametrize("field", ["segments_preallocated_total", "recovery_truncated_bytes"])
def test_negative_totals_are_a_bug(field: str) -> None:
    values = {"segments_preallocated_total": 0, "preallocation_seconds_total": 0.0,
              "flush_syncs_total": 0, "retention_deleted_segments_total": 0,
              "retention_deleted_bytes_total": 0, "recovery_mode": RecoveryMode.NORMAL,
              "recovery_truncated_bytes": 0}
    StoreStats(**values)  # type: ignore[arg-type]
    with pytest.raises(AssertionError):
        StoreStats(**{**values, field: -1})  # type: ignore[arg-type]
