"""Group-commit alignment (storage/format/padding.py): filler sizes, the filler record itself, every
group sync ending on a boundary, and fillers invisible to readers but accepted by scrub."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from mqstore.storage import (
    ConfigError,
    FlushMode,
    GetStatus,
    Message,
    MessageStore,
    StoreConfig,
)
from mqstore.storage.format import record
from mqstore.storage.format.hosts import parse_host
from mqstore.storage.format.padding import (
    PADDING_TOPIC,
    PaddingEncoder,
    padding_size_bytes,
)
from mqstore.storage.race import RaceStore
from mqstore.storage.recovery.scrub import verify_store
from tests.conftest import SMALL_SEGMENT_BYTES, small_config

ALIGN = 4096
MIN = 114
"""A filler with an IPv4 store host and an empty body: 91 B fixed + 23 B topic."""


def test_padding_sizes() -> None:
    def size(position: int, room: int = 1 << 20) -> int:
        return padding_size_bytes(position=position, room_bytes=room, align_bytes=ALIGN,
                                  size_bytes_min=MIN)

    assert size(0) == 0
    assert size(3 * ALIGN) == 0
    assert size(ALIGN - 1000) == 1000
    assert size(ALIGN - MIN) == MIN
    assert size(ALIGN - MIN + 1) == MIN - 1 + ALIGN, "too small a gap: the boundary after"
    assert size(ALIGN - 1) == 1 + ALIGN
    assert size(ALIGN - 1000, room=1008) == 1000, "the 8-byte BLANK reserve is kept"
    assert size(ALIGN - 1000, room=1007) == 0, "no room: the segment end is a boundary"
    assert size(ALIGN - 1000, room=1000) == 0
    small = padding_size_bytes(position=5, room_bytes=1 << 20, align_bytes=64, size_bytes_min=MIN)
    assert small == 59 + 64 and (5 + small) % 64 == 0, "several alignments when needed"


@pytest.mark.parametrize("store_host", ["127.0.0.1:10911", "[::1]:10911"])
def test_filler_is_a_valid_record_of_the_reserved_topic(store_host: str) -> None:
    encoder = PaddingEncoder(parse_host(store_host, setting="store_host"))
    assert encoder.size_bytes_min == MIN + (24 if "::" in store_host else 0)
    for size in (encoder.size_bytes_min, 1000, ALIGN + MIN - 1):
        encoded = encoder.encode(size_bytes=size, physical_offset=8192, store_timestamp_ms=17)
        assert len(encoded) == size
        check = record.check_record(encoded, 0, limit=len(encoded),
                                    expected_physical_offset=8192, verify_crc=True)
        assert check.status is record.RecordCheck.OK, check.reason
        assert check.head is not None
        assert (check.head.queue_id, check.head.queue_offset) == (0, 0)
        assert check.head.store_timestamp_ms == 17
        _, topic, properties = record.decode_variable(encoded, 0, check.layout, check.head)
        assert (topic, properties) == (PADDING_TOPIC.encode(), b"")


@pytest.mark.parametrize("align", [3, 1000, -4096, 2 * SMALL_SEGMENT_BYTES, True])
def test_alignment_setting_is_checked(align: object) -> None:
    with pytest.raises(ConfigError, match="group_commit_align_bytes"):
        small_config(group_commit_align_bytes=align)


def aligned_config(**overrides: object) -> StoreConfig:
    return small_config(flush_mode=FlushMode.SYNC, group_commit_align_bytes=ALIGN, **overrides)


@pytest.mark.parametrize("pool", [False, True])
def test_every_group_sync_ends_on_a_boundary_when_the_gap_allows(store_dir: Path,
                                                                 pool: bool) -> None:
    flushed_at_syncs: list[int] = []
    with MessageStore.open(store_dir, aligned_config(pool_enabled=pool)) as store:
        group_commit = store._wiring.group_commit
        assert group_commit is not None
        on_flushed = group_commit._on_flushed

        def observe() -> None:  # runs on the group commit thread, right after each sync
            flushed_at_syncs.append(store.flushed_position)
            on_flushed()

        group_commit._on_flushed = observe
        rng = random.Random(5)
        bodies = [rng.randbytes(rng.randint(50, 5000)) for _ in range(400)]

        def produce(producer: int) -> None:
            for body in bodies[producer::8]:
                assert store.put(Message("T", producer % 3, body)).ok

        workers = [threading.Thread(target=produce, args=(p,)) for p in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert store.group_commit_stats.syncs_total == len(flushed_at_syncs)
    aligned = [p for p in flushed_at_syncs if p % ALIGN == 0]
    assert len(aligned) > len(flushed_at_syncs) // 2, "most groups must end aligned"
    for position in flushed_at_syncs:
        if position % ALIGN:  # allowed only where no filler fits before the segment's end
            room = SMALL_SEGMENT_BYTES - position % SMALL_SEGMENT_BYTES
            needed = padding_size_bytes(position=position, room_bytes=1 << 30,
                                        align_bytes=ALIGN, size_bytes_min=MIN)
            assert needed + record.BLANK_SIZE_BYTES > room, (position, needed, room)


def test_fillers_are_invisible_to_readers_and_accepted_by_scrub(store_dir: Path) -> None:
    config = aligned_config()
    bodies = [bytes([i]) * (200 + i * 37) for i in range(60)]
    with MessageStore.open(store_dir, config) as store:
        results = [store.put(Message("T", 0, body, keys=(f"k{i}",)))
                   for i, body in enumerate(bodies)]
        assert all(result.ok for result in results)
        assert store.written_position > results[-1].physical_offset + results[-1].size_bytes, \
            "the last sync padded after the last message"
    summaries, corruptions = verify_store(store_dir)
    assert not corruptions
    fillers = sum(summary.record_count for summary in summaries) - len(bodies)
    assert fillers > 10
    with MessageStore.open(store_dir, config) as store:  # recovery walks the fillers too
        assert store.next_queue_offset("T", 0) == len(bodies)
        assert store.next_queue_offset(PADDING_TOPIC, 0) == 0
        assert [m.body for m in store.iter_messages()] == bodies
        with store.get("T", 0, 0, 100) as pulled:
            assert [bytes(m.body) for m in pulled.messages] == bodies[:32]
        with store.get(PADDING_TOPIC, 0, 0, 10) as pulled:
            assert pulled.status is GetStatus.NO_MESSAGE_IN_QUEUE
        assert [m.body for m in store.query_by_key("T", "k59")] == [bodies[59]]
        filler_at = results[0].physical_offset + results[0].size_bytes
        filler = store.message_at(filler_at)  # a real record, found where the group ended
        assert filler.topic == PADDING_TOPIC
        assert (filler_at + filler.total_size) % ALIGN == 0
    with RaceStore.open(store_dir, config) as race:
        assert race.append("T", 0, b"after reopen") == len(bodies)
