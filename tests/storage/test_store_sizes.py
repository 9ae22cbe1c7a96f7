"""Sizes read from a store directory, and the embedded profile (issue 18, Found 6 and 7:
three messages in a store opened without a config took 2.5 GB of disk; tools that did not
make a store assumed their own index geometry and failed on it)."""

from __future__ import annotations

import os
from pathlib import Path

from mqstore.storage import Message, MessageStore, StoreConfig
from mqstore.storage.store_sizes import (
    EMBEDDED_SEGMENT_SIZE_BYTES,
    IndexGeometry,
    detected_sizes,
    embedded_config,
    index_geometries,
)


def _allocated_bytes(directory: Path) -> int:
    return sum(os.stat(Path(root) / name).st_blocks * 512
               for root, _, names in os.walk(directory) for name in names)


def _put_three(store: MessageStore) -> None:
    store.put_batch([Message("Orders", i, b"m", keys=(f"k{i}",)) for i in range(3)])
    assert store.wait_dispatched(timeout_ms=30_000)


def test_a_store_opened_without_a_config_fits_a_laptop(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path) as store:
        _put_three(store)
        assert store.config.segment_size_bytes == EMBEDDED_SEGMENT_SIZE_BYTES
    # two 64 MiB segments (one prepared ahead), a 21 MB index file, three queue files
    assert _allocated_bytes(tmp_path) < 200 * 2**20


def test_without_a_config_a_store_opens_with_the_sizes_it_was_made_with(
        tmp_path: Path) -> None:
    made = StoreConfig.for_small_segments(1 << 20)
    with MessageStore.open(tmp_path, made) as store:
        _put_three(store)
    with MessageStore.open(tmp_path) as store:
        assert store.config.segment_size_bytes == made.segment_size_bytes
        assert store.config.index_hash_slot_count == made.index_hash_slot_count
        assert store.config.consume_queue_file_size_bytes == \
            made.consume_queue_file_size_bytes
        with store.get("Orders", 2, 0, 32) as pulled:
            assert [bytes(m.body) for m in pulled.messages] == [b"m"]


def test_detected_sizes_of_each_profile(tmp_path: Path) -> None:
    assert detected_sizes(tmp_path) == {}
    with MessageStore.open(tmp_path, embedded_config(None)) as store:
        _put_three(store)
    assert detected_sizes(tmp_path) == {
        "segment_size_bytes": EMBEDDED_SEGMENT_SIZE_BYTES,
        "consume_queue_file_size_bytes": 6_000_000,
        "index_hash_slot_count": 250_000, "index_count_max": 1_000_000}


def test_an_index_of_other_counts_is_detected_when_they_are_given(tmp_path: Path) -> None:
    other = IndexGeometry(hash_slot_count=333, index_count_max=777)
    assert other not in index_geometries()
    config = StoreConfig.for_small_segments(1 << 20, index_hash_slot_count=333,
                                            index_count_max=777)
    with MessageStore.open(tmp_path, config) as store:
        _put_three(store)
    assert "index_hash_slot_count" not in detected_sizes(tmp_path)
    for given in ({"index_hash_slot_count": 333, "index_count_max": 777},
                  {"index_hash_slot_count": 333}, {"index_count_max": 777}):
        found = detected_sizes(tmp_path, **given)
        assert (found["index_hash_slot_count"], found["index_count_max"]) == (333, 777)
    assert "index_count_max" not in detected_sizes(tmp_path, index_hash_slot_count=332,
                                                   index_count_max=777)


def test_embedded_config_keeps_an_existing_stores_segment_size(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig.for_small_segments(1 << 20)) as store:
        _put_three(store)
    config = embedded_config(tmp_path, segment_size_bytes=64 << 20)
    assert config.segment_size_bytes == 1 << 20
    assert config.message_body_size_bytes_max <= (1 << 20) // 4


def test_sizes_no_file_fixes_yet_come_from_the_profile_of_the_segment_size(
        tmp_path: Path) -> None:
    small = StoreConfig.for_small_segments(1 << 20)
    MessageStore.open(tmp_path / "small", small).close()          # segments only
    assert embedded_config(tmp_path / "small").consume_queue_file_size_bytes == \
        small.consume_queue_file_size_bytes
    MessageStore.open(tmp_path / "embedded", embedded_config(None)).close()
    assert embedded_config(tmp_path / "embedded").index_count_max == 1_000_000
