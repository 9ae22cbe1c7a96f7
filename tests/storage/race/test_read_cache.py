"""The read cache (storage/race/read_cache.py): counters, read-once and drop-below, size classes
and block reuse, the byte bound under a random workload, prefetch, and `get_range` giving the
same answers with the cache on and off."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from mqstore.storage import ConfigError, FlushMode, StoreConfig
from mqstore.storage.race import RaceStore
from mqstore.storage.race.read_cache import PrefetchService, ReadCache
from tests.conftest import small_config

CLASSES = (1024, 4096, 8192)


def cache(capacity_bytes: int = 1 << 20) -> ReadCache:
    return ReadCache(capacity_bytes=capacity_bytes, size_classes_bytes=CLASSES)


def test_hits_misses_and_read_once() -> None:
    c = cache()
    for offset in range(10):
        assert c.put("T", 0, offset, bytes([offset]) * 100)
    assert c.take("T", 0, 0, 5) == {o: bytes([o]) * 100 for o in range(5)}
    stats = c.stats()
    assert (stats.hits, stats.misses, stats.entries) == (5, 0, 5)
    assert c.take("T", 0, 0, 5) == {}, "read once: a read entry is gone"
    assert c.take("T", 0, 5, 12) == {o: bytes([o]) * 100 for o in range(5, 10)}
    stats = c.stats()
    assert (stats.hits, stats.misses, stats.entries, stats.cached_bytes) == (10, 7, 0, 0)
    assert c.take("Other", 1, 0, 3) == {}
    assert c.stats().misses == 10


def test_a_reader_moving_on_drops_what_it_skipped() -> None:
    c = cache()
    for offset in range(10):
        c.put("T", 0, offset, b"x" * 10)
        c.put("T", 1, offset, b"y" * 10)
    assert c.take("T", 0, 6, 7) == {6: b"x" * 10}
    stats = c.stats()
    assert (stats.dropped, stats.entries) == (6, 13), "queue 1 keeps its entries"
    assert c.missing("T", 0, 0, 10) == [0, 1, 2, 3, 4, 5, 6]
    c.put("T", 0, 2, b"late")  # a prefetch that finished after the reader passed
    c.take("T", 0, 7, 8)
    assert c.missing("T", 0, 0, 10) == list(range(8)), "the late entry went too"


def test_size_classes_and_what_is_not_cached() -> None:
    c = cache()
    assert c.class_index(1) == 0
    assert c.class_index(1024) == 0
    assert c.class_index(1025) == 1
    assert c.class_index(8192) == 2
    assert c.class_index(8193) is None
    assert not c.put("T", 0, 0, bytes(8193)), "larger than the largest class"
    assert c.put("T", 0, 1, bytes(1025))
    assert not c.put("T", 0, 1, bytes(10)), "already cached"
    assert c.stats().blocks_by_class == {1024: 0, 4096: 1, 8192: 0}
    assert c.stats().allocated_bytes == 4096


def test_freed_blocks_are_reused_not_reallocated() -> None:
    c = cache()
    rng = random.Random(1)
    for round_number in range(20):
        for offset in range(round_number * 30, round_number * 30 + 30):
            c.put("T", 0, offset, bytes(rng.choice((100, 2000, 6000))))
        c.take("T", 0, round_number * 30, round_number * 30 + 30)
        if round_number == 0:
            allocations = c.stats().allocations_by_class
    stats = c.stats()
    assert sum(allocations.values()) > 0
    assert all(stats.allocations_by_class[size] <= allocations[size] + 30 for size in CLASSES)
    assert sum(stats.allocations_by_class.values()) <= sum(allocations.values()) + 30, \
        "allocation count must stay flat once the pools hold enough blocks"
    assert stats.evictions == 0


def test_full_cache_evicts_the_oldest_entry() -> None:
    c = cache(capacity_bytes=8 * 1024)
    for queue_id in range(9):
        assert c.put("T", queue_id, 0, bytes(1000))
    stats = c.stats()
    assert (stats.evictions, stats.entries, stats.allocated_bytes) == (1, 8, 8192)
    assert c.take("T", 0, 0, 1) == {}, "the oldest went first"
    assert c.take("T", 1, 0, 1) == {0: bytes(1000)}


def test_free_blocks_of_other_classes_go_before_live_entries() -> None:
    c = cache(capacity_bytes=16 * 1024)
    for offset in range(8):
        c.put("T", 0, offset, bytes(1000))
    c.put("T", 1, 0, bytes(1000))
    c.take("T", 0, 0, 8)  # 8 small blocks free, one small entry live: 9 KiB allocated
    assert c.put("T", 2, 0, bytes(8000))
    stats = c.stats()
    assert stats.evictions == 0, "a free block holds no data: drop it, not a live entry"
    assert stats.blocks_by_class == {1024: 8, 4096: 0, 8192: 1}
    assert c.take("T", 1, 0, 1) == {0: bytes(1000)}


def test_byte_bound_holds_and_data_is_exact_under_a_random_workload() -> None:
    rng = random.Random(20261122)
    capacity = 40 * 1024
    c = cache(capacity_bytes=capacity)
    written: dict[tuple[int, int], bytes] = {}
    next_offset = [0] * 4
    read_from = [0] * 4
    for _ in range(3000):
        queue_id = rng.randrange(4)
        if rng.random() < 0.6:
            data = rng.randbytes(rng.choice((rng.randint(1, 1024), rng.randint(1, 9000))))
            offset = next_offset[queue_id]
            next_offset[queue_id] += 1
            written[queue_id, offset] = data
            c.put("T", queue_id, offset, data)
        else:
            start = read_from[queue_id] if rng.random() < 0.8 else rng.randrange(
                next_offset[queue_id] + 1)
            end = start + rng.randint(0, 12)
            for offset, data in c.take("T", queue_id, start, end).items():
                assert data == written[queue_id, offset]
            read_from[queue_id] = min(end, next_offset[queue_id])
        stats = c.stats()
        assert stats.allocated_bytes <= capacity
        assert stats.cached_bytes <= stats.allocated_bytes
        assert stats.allocated_bytes == sum(n * size for size, n in stats.blocks_by_class.items())
    assert c.stats().hits > 100
    assert c.stats().evictions > 0


def test_prefetch_loads_missing_offsets_and_drops_when_full() -> None:
    c = cache()
    c.put("T", 0, 11, b"have it")
    loads: list[tuple[str, int, int, int]] = []
    done = threading.Event()

    def load(topic: str, queue_id: int, start: int, end: int) -> dict[int, bytes]:
        loads.append((topic, queue_id, start, end))
        done.set()
        return {offset: f"loaded {offset}".encode() for offset in range(start, end)}

    failures: list[BaseException] = []
    service = PrefetchService(c, load=load, pending_max=1,
                              on_fatal=lambda _name, error: failures.append(error))
    assert service.submit("T", 0, 10, 12)
    assert not service.submit("T", 0, 20, 30), "the pending queue holds one"
    assert c.stats().prefetch_dropped == 1
    service.start()
    try:
        assert done.wait(5)
        deadline = time.monotonic() + 5
        while c.stats().prefetched < 1 and time.monotonic() < deadline:
            time.sleep(0.001)
    finally:
        service.stop()
    assert not failures
    assert loads == [("T", 0, 10, 11)], "only what the cache is missing"
    assert c.take("T", 0, 10, 12) == {10: b"loaded 10", 11: b"have it"}
    assert c.stats().prefetched == 1


@pytest.mark.parametrize(("setting", "value"), [
    ("read_cache_size_classes_bytes", ()),
    ("read_cache_size_classes_bytes", (4096, 1024)),
    ("read_cache_size_classes_bytes", (0, 1024)),
    ("read_cache_capacity_bytes", 1000),
    ("read_cache_capacity_bytes", 0),
    ("read_cache_prefetch_pending_max", 0),
    ("range_read_wait_ms", -1),
])
def test_cache_settings_are_checked(setting: str, value: object) -> None:
    with pytest.raises(ConfigError, match=setting):
        small_config(**{setting: value})


def race_store(directory: Path, *, cache_on: bool) -> RaceStore:
    config: StoreConfig = small_config(
        flush_mode=FlushMode.SYNC, read_cache_enabled=cache_on,
        read_cache_capacity_bytes=64 * 1024, read_cache_size_classes_bytes=(512, 2048, 4096))
    return RaceStore.open(directory, config)


def test_get_range_answers_the_same_with_the_cache_on_and_off(tmp_path: Path) -> None:
    """One seeded workload of appends and reads (heads, tails, re-reads, past the end) on
    two stores, cache off and on (small, so it evicts, with prefetch): same answers."""
    rng = random.Random(77)
    with race_store(tmp_path / "off", cache_on=False) as off, \
            race_store(tmp_path / "on", cache_on=True) as on:
        positions = {queue_id: 0 for queue_id in range(6)}
        for _ in range(600):
            queue_id = rng.randrange(6)
            if rng.random() < 0.55:
                data = rng.randbytes(rng.choice((rng.randint(1, 500), rng.randint(1, 6000))))
                assert off.append("T", queue_id, data) == on.append("T", queue_id, data)
                continue
            if rng.random() < 0.1:
                positions[queue_id] = rng.randrange(off.store.next_queue_offset("T", queue_id) + 2)
            offset, fetch_num = positions[queue_id], rng.randint(1, 40)
            answer = off.get_range("T", queue_id, offset, fetch_num)
            assert on.get_range("T", queue_id, offset, fetch_num) == answer
            positions[queue_id] = offset + len(answer)
        assert on.cache is not None
        stats = on.cache.stats()
        assert stats.hits > 50, stats
        assert stats.misses > 0, stats
        assert stats.allocated_bytes <= 64 * 1024
