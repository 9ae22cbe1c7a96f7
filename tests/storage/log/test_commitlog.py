"""The put path: statuses, rolls and BLANKs, batches, byte-for-byte layout."""

from __future__ import annotations

import errno
import itertools
import struct
import threading
import time
from pathlib import Path

import pytest

from mqstore.storage import (
    ConfigError,
    Message,
    MessageStore,
    NoRecordError,
    PutStatus,
    StoreConfig,
)
from mqstore.storage.files import mapped_file as segment_module
from mqstore.storage.format import record
from mqstore.storage.format.message import PutResult
from mqstore.storage.log.commitlog import CommitLog
from tests.conftest import SMALL_SEGMENT_BYTES, small_config


def _segments(store_dir: Path) -> list[Path]:
    return sorted(p for p in (store_dir / "commitlog").iterdir() if p.name.isdigit())


def test_put_returns_offsets_and_reads_back(store: MessageStore) -> None:
    first = store.put(Message("TopicA", 0, b"one", tags="TagA", keys=("k1", "k2")))
    second = store.put(Message("TopicA", 0, b"two"))
    other = store.put(Message("TopicA", 1, b"three"))
    assert [r.status for r in (first, second, other)] == [PutStatus.PUT_OK] * 3
    assert (first.queue_offset, second.queue_offset, other.queue_offset) == (0, 1, 0)
    assert first.physical_offset == 0
    assert second.physical_offset == first.size_bytes
    assert len(first.msg_id) == 32
    stored = store.message_at(first.physical_offset)
    assert stored.body == b"one"
    assert stored.tags == "TagA"
    assert stored.keys == ("k1", "k2")
    assert stored.store_timestamp_ms == first.store_timestamp_ms
    assert stored.msg_id == first.msg_id
    assert stored.store_host == "127.0.0.1:10911"


def test_no_record_straddles_and_every_full_segment_ends_with_blank(
        store: MessageStore, store_dir: Path) -> None:
    results = [store.put(Message("T", i % 4, bytes([i % 251]) * (100 + i * 37 % 3000)))
               for i in range(400)]
    assert all(r.ok for r in results)
    assert store.segment_count >= 4
    for result in results:
        start = result.physical_offset
        end = start + result.size_bytes
        assert start // SMALL_SEGMENT_BYTES == (end - 1) // SMALL_SEGMENT_BYTES
    full = [path for path in _segments(store_dir)
            if int(path.name) + SMALL_SEGMENT_BYTES <= store.written_position]
    assert len(full) >= 3
    ends = sorted(r.physical_offset + r.size_bytes for r in results)
    for path in full:
        start = int(path.name)
        last_end = max(e for e in ends if e <= start + SMALL_SEGMENT_BYTES)
        data = path.read_bytes()
        size, magic = struct.unpack_from(">ii", data, last_end - start)
        assert magic == record.MAGIC_BLANK
        assert size == start + SMALL_SEGMENT_BYTES - last_end
        assert size >= record.BLANK_SIZE_BYTES


def test_every_record_decodes_byte_for_byte(store: MessageStore, store_dir: Path) -> None:
    results = [store.put(Message("Bytes", 2, b"%05d" % i, properties={"p": str(i)}))
               for i in range(50)]
    for index, result in enumerate(results):
        raw = _segments(store_dir)[0].read_bytes()[result.physical_offset:][:result.size_bytes]
        total_size, magic, crc, queue_id, _, queue_offset, physical = struct.unpack_from(
            ">iiiiiqq", raw)
        assert (total_size, magic, queue_id) == (result.size_bytes, record.MAGIC_V1, 2)
        assert (queue_offset, physical) == (index, result.physical_offset)
        assert crc == record.body_crc(b"%05d" % index)
        assert raw[88:93] == b"%05d" % index
        assert raw[93] == len(b"Bytes")
        assert raw[94:99] == b"Bytes"
        properties_size = struct.unpack_from(">h", raw, 99)[0]
        assert raw[101:101 + properties_size] == f"p\x01{index}\x02".encode()
        assert 101 + properties_size == total_size


def test_batch_is_one_contiguous_write_with_consecutive_offsets(store: MessageStore) -> None:
    store.put(Message("Q", 0, b"before"))
    results = store.put_batch([Message("Q", 0, b"m%d" % i) for i in range(20)])
    assert [r.queue_offset for r in results] == list(range(1, 21))
    for previous, current in itertools.pairwise(results):
        assert current.physical_offset == previous.physical_offset + previous.size_bytes
    assert [m.body for m in store.iter_messages()][1:] == [b"m%d" % i for i in range(20)]


def test_batch_that_does_not_fit_rolls_whole(store: MessageStore) -> None:
    while store.written_position < SMALL_SEGMENT_BYTES - 9000:
        assert store.put(Message("Q", 0, b"x" * 4000)).ok
    results = store.put_batch([Message("Q", 0, b"y" * 1000) for _ in range(10)])
    assert all(r.ok for r in results)
    assert results[0].physical_offset == SMALL_SEGMENT_BYTES


@pytest.mark.parametrize(("message", "words"), [
    (Message("bad topic", 0, b"x"), "illegal character ' '"),
    (Message("", 0, b"x"), "topic is empty"),
    (Message("T", -1, b"x"), "queue_id=-1"),
    (Message("T", 0, b"x" * (SMALL_SEGMENT_BYTES // 4 + 1)), "message_body_size_bytes_max"),
    (Message("T", 0, b"x", properties={"k": "v\x02"}), "separator"),
    (Message("T", 0, b"x", keys=("has space",)), "without spaces"),
    (Message("T", 0, b"x", born_host="nonsense"), "born_host"),
    (Message("T", 0, "text"), "body must be bytes"),  # type: ignore[arg-type]
])
def test_illegal_messages_are_refused_with_a_reason(store: MessageStore, message: Message,
                                                    words: str) -> None:
    result = store.put(message)
    assert result.status is PutStatus.MESSAGE_ILLEGAL
    assert words in result.reason
    assert store.written_position == 0


def test_one_illegal_message_refuses_the_whole_batch(store: MessageStore) -> None:
    results = store.put_batch([Message("T", 0, b"ok"), Message("T T", 0, b"bad")])
    assert {r.status for r in results} == {PutStatus.MESSAGE_ILLEGAL}
    assert "message 1 of the batch" in results[0].reason
    assert store.written_position == 0


def test_closed_store_refuses_puts(store_dir: Path) -> None:
    opened = MessageStore.open(store_dir, small_config())
    opened.close()
    result = opened.put(Message("T", 0, b"x"))
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "closed" in result.reason


def test_ipv6_hosts_and_long_topics(store_dir: Path) -> None:
    config = small_config(store_host="[::1]:10911", topic_size_bytes_max=255)
    with MessageStore.open(store_dir, config) as opened:
        result = opened.put(Message("L" * 200, 0, b"v6", born_host="[fe80::1]:4000"))
        stored = opened.message_at(result.physical_offset)
    assert stored.magic == record.MAGIC_V2
    assert stored.sysflag & 0x30 == 0x30
    assert stored.born_host == "[fe80::1]:4000"
    assert stored.store_host == "[::1]:10911"
    assert stored.topic == "L" * 200


def test_topics_over_127_bytes_need_the_v2_opt_in(store: MessageStore) -> None:
    result = store.put(Message("L" * 128, 0, b"x"))
    assert result.status is PutStatus.MESSAGE_ILLEGAL
    assert "topic_size_bytes_max" in result.reason


def test_message_at_refuses_positions_that_are_not_records(store: MessageStore) -> None:
    result = store.put(Message("T", 0, b"payload"))
    with pytest.raises(NoRecordError):
        store.message_at(result.physical_offset + 1)
    with pytest.raises(NoRecordError):
        store.message_at(10 * SMALL_SEGMENT_BYTES)


@pytest.mark.parametrize("overrides", [
    {"segment_size_bytes": 1000},
    {"segment_size_bytes": 4096, "message_body_size_bytes_max": 4096},
    {"pool_buffer_count": 0},
    {"flush_interval_ms": -1},
    {"store_host": "localhost"},
])
def test_impossible_configs_are_refused(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        StoreConfig(**overrides)  # type: ignore[arg-type]


def test_disk_full_is_service_not_available(store_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int, size_bytes: int, method: object, **options: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    config = small_config(allocate_wait_ms=2000, dispatch_retry_interval_ms=10)
    with MessageStore.open(store_dir, config) as opened:
        assert opened.put(Message("D", 0, b"x" * 4000)).ok
        monkeypatch.setattr(segment_module, "prepare_file", no_space)
        results = [opened.put(Message("D", 0, b"x" * 4000)) for _ in range(40)]
        refused = [r for r in results if not r.ok]
        assert refused, "filling the segment must need a new one"
        assert refused[0].status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "disk full" in refused[0].reason
        monkeypatch.undo()
        after = opened.put(Message("D", 0, b"after"))
        assert after.ok  # nothing written before is harmed
        assert [m.body for m in opened.iter_messages()][:1] == [b"x" * 4000]
        deadline = time.monotonic() + 5  # dispatch resumes once files can be created again
        while opened.max_offset("D", 0) <= after.queue_offset and time.monotonic() < deadline:
            time.sleep(0.01)
        assert opened.max_offset("D", 0) == after.queue_offset + 1


def test_segment_creation_failure(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(fd: int, size_bytes: int, method: object, **options: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(segment_module, "prepare_file", broken)
    with MessageStore.open(store_dir, small_config()) as opened:
        result = opened.put(Message("D", 0, b"x"))
        assert result.status is PutStatus.CREATE_MAPPED_FILE_FAILED
        assert "Input/output error" in result.reason


def test_busy_put_lock_is_os_pagecache_busy(store_dir: Path) -> None:
    with MessageStore.open(store_dir, small_config(put_lock_timeout_ms=20)) as opened:
        opened._commitlog._put_lock.acquire()  # a writer stalled inside the lock
        try:
            result = opened.put(Message("B", 0, b"x"))
            batch = opened.put_batch([Message("B", 0, b"y")] * 2)
        finally:
            opened._commitlog._put_lock.release()
        assert result.status is PutStatus.OS_PAGECACHE_BUSY
        assert "put_lock_timeout_ms" in result.reason
        assert {r.status for r in batch} == {PutStatus.OS_PAGECACHE_BUSY}
        assert opened.put(Message("B", 0, b"z")).queue_offset == 0


def test_concurrent_batches_keep_offsets_exact(store: MessageStore,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches race for the put lock (their unlocked guesses break and are re-stamped):
    every record must still carry the queue offset and position its result reports."""
    fallbacks = []
    restamp = CommitLog._append_and_restamp

    def counting_restamp(self: CommitLog, *arguments: object) -> object:
        fallbacks.append(1)
        return restamp(self, *arguments)  # type: ignore[arg-type]

    monkeypatch.setattr(CommitLog, "_append_and_restamp", counting_restamp)
    results: list[list[PutResult]] = [[] for _ in range(6)]

    def produce(producer: int) -> None:
        queue_id = producer % 2  # three producers share each queue
        for round_index in range(40):
            batch = [Message("Race", queue_id, b"%d:%d:%d" % (producer, round_index, i))
                     for i in range(1 + (producer + round_index) % 7)]
            results[producer].extend(store.put_batch(batch))

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    flat = [r for per_producer in results for r in per_producer]
    assert all(r.ok for r in flat)
    for queue_id in (0, 1):
        offsets = sorted(r.queue_offset for p, per in enumerate(results)
                         for r in per if p % 2 == queue_id)
        assert offsets == list(range(len(offsets)))
    for result in flat:
        stored = store.message_at(result.physical_offset)
        assert stored.queue_offset == result.queue_offset
        assert stored.store_timestamp_ms == result.store_timestamp_ms
    stamps = [m.store_timestamp_ms for m in store.iter_messages()]
    assert stamps == sorted(stamps), "store time follows position"
    assert fallbacks, "the race must have broken some guesses (the re-stamp path)"
