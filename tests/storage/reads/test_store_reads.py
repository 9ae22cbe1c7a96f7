"""Reads through the consume queues: pull statuses, tag filters, key and time lookups."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mqstore.storage import (
    GetStatus,
    Message,
    MessageStore,
    PutStatus,
    SubscriptionExpressionError,
)
from mqstore.storage.format.java_hash import java_string_hash
from mqstore.storage.queues.consume_queue import ConsumeQueue
from mqstore.storage.reads.get import get as get_from_queue
from tests.conftest import small_config


def _wait_dispatched(store: MessageStore) -> None:
    deadline = time.monotonic() + 5
    while store.dispatch_behind_bytes and time.monotonic() < deadline:
        time.sleep(0.002)
    assert store.dispatch_behind_bytes == 0


def test_status_table(store: MessageStore) -> None:
    assert store.get("Nope", 0, 0, 10).status is GetStatus.NO_MESSAGE_IN_QUEUE
    for index in range(5):
        store.put(Message("S", 1, b"m%d" % index))
    _wait_dispatched(store)
    with store.get("S", 1, 0, 3) as result:
        assert result.status is GetStatus.FOUND
        assert [bytes(m.body) for m in result.messages] == [b"m0", b"m1", b"m2"]
        assert (result.next_offset, result.min_offset, result.max_offset) == (3, 0, 5)
    overflow_one = store.get("S", 1, 5, 3)
    assert (overflow_one.status, overflow_one.next_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 5)
    badly = store.get("S", 1, 9, 3)
    assert (badly.status, badly.next_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 5)


def test_offset_too_small_and_found_null(tmp_path: Path) -> None:
    queue = ConsumeQueue(tmp_path / "queue", topic="T", queue_id=0, file_size_bytes=200,
                         allocate_step_bytes=4096, creating_directory=tmp_path / "creating")
    for offset in range(12, 25):  # a queue whose first entry is offset 12: files 10.., 20..
        queue.put(physical_offset=offset * 100, size_bytes=100, tags_code=0,
                  queue_offset=offset)
    small = get_from_queue(queue, 3, 5, tags=None, find_segment=lambda _: None,
                           transfer_count_max=32, transfer_bytes_max=1 << 20, verify_crc=True)
    assert (small.status, small.next_offset) == (GetStatus.OFFSET_TOO_SMALL, 12)
    removed = get_from_queue(queue, 12, 5, tags=None, find_segment=lambda _: None,
                             transfer_count_max=32, transfer_bytes_max=1 << 20, verify_crc=True)
    assert (removed.status, removed.next_offset) == (GetStatus.MESSAGE_WAS_REMOVING, 20)
    queue.files.pop(0).close()  # the file holding offsets 10..19 is gone
    missing = get_from_queue(queue, 12, 5, tags=None, find_segment=lambda _: None,
                             transfer_count_max=32, transfer_bytes_max=1 << 20, verify_crc=True)
    assert (missing.status, missing.next_offset) == (GetStatus.OFFSET_FOUND_NULL, 20)
    queue.close()


def test_tag_filter_checks_the_exact_tag_after_the_hash(store: MessageStore) -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")  # a real Java hash collision
    for index, tag in enumerate(["Aa", "BB", "Cc", "Aa", None]):
        store.put(Message("Tags", 0, b"%d" % index, tags=tag))
    _wait_dispatched(store)
    with store.get("Tags", 0, 0, 10, tags=["Aa"]) as result:
        assert [bytes(m.body) for m in result.messages] == [b"0", b"3"]
        assert result.next_offset == 5
    with store.get("Tags", 0, 0, 10, tags=["Zz"]) as result:
        assert result.status is GetStatus.NO_MATCHED_MESSAGE
        assert result.next_offset == 5


def test_bodies_are_zero_copy_until_released(store: MessageStore) -> None:
    store.put(Message("Z", 0, b"zero-copy"))
    _wait_dispatched(store)
    result = store.get("Z", 0, 0, 1)
    body = result.messages[0].body
    assert isinstance(body, memoryview)
    assert bytes(body) == b"zero-copy"
    assert bytes(result.records[0][-2 - 0:]) == b"\x00\x00"  # the record as stored
    result.release()
    with pytest.raises(ValueError):
        bytes(body)


def test_transfer_limits(store_dir: Path) -> None:
    config = small_config(get_transfer_count_max=4, get_transfer_bytes_max=1000)
    with MessageStore.open(store_dir, config) as store:
        store.put_batch([Message("L", 0, b"x" * 300) for _ in range(10)])
        _wait_dispatched(store)
        with store.get("L", 0, 0, 100) as result:
            assert len(result.messages) == 2  # 2 × ~400-byte records fit under 1000 bytes
        store.put_batch([Message("C", 0, b"y") for _ in range(10)])
        _wait_dispatched(store)
        with store.get("C", 0, 0, 100) as result:
            assert len(result.messages) == 4
            assert result.next_offset == 4


def test_query_by_key_is_exact_when_every_key_collides(store_dir: Path) -> None:
    config = small_config(index_hash_slot_count=1)  # every key shares the one slot
    with MessageStore.open(store_dir, config) as store:
        for index in range(30):
            store.put(Message("K", index % 3, b"%d" % index, keys=(f"key-{index % 5}",)))
        store.put(Message("Other", 0, b"other", keys=("key-1",)))
        _wait_dispatched(store)
        found = store.query_by_key("K", "key-1", max_messages=32)
        assert [m.body for m in found] == [b"%d" % i for i in range(30) if i % 5 == 1]
        assert all(m.topic == "K" for m in found)
        assert store.query_by_key("K", "key-9") == []


def test_offset_by_time(store: MessageStore) -> None:
    stamps = []
    for index in range(6):
        stamps.append(store.put(Message("Time", 0, b"%d" % index)).store_timestamp_ms)
        time.sleep(0.003)
    _wait_dispatched(store)
    for index, stamp in enumerate(stamps):
        assert store.offset_by_time("Time", 0, stamp) == index
    assert store.offset_by_time("Time", 0, 0) == 0
    assert store.offset_by_time("Time", 0, stamps[-1] + 10_000) == 6


def test_dispatch_sends_batched_notices(store_dir: Path) -> None:
    notices: list[dict[tuple[str, int], int]] = []
    with MessageStore.open(store_dir, small_config(), listener=notices.append) as store:
        store.put_batch([Message("N", q % 2, b"n") for q in range(10)])
        _wait_dispatched(store)
        deadline = time.monotonic() + 5
        while not notices and time.monotonic() < deadline:
            time.sleep(0.002)
    merged: dict[tuple[str, int], int] = {}
    for notice in notices:
        merged.update(notice)
    assert merged == {("N", 0): 5, ("N", 1): 5}


def test_a_tag_expression_string_filters_by_its_tags(store: MessageStore) -> None:
    """A string is an expression: "red" is the tag red, not the tags r, e and d."""
    for tag in ("red", "blue", "red", "green"):
        store.put(Message("Colours", 0, tag.encode(), tags=tag))
    _wait_dispatched(store)
    with store.get("Colours", 0, 0, 10, tags="red") as result:
        assert [bytes(m.body) for m in result.messages] == [b"red", b"red"]
    with store.get("Colours", 0, 0, 10, tags="blue || green") as result:
        assert [bytes(m.body) for m in result.messages] == [b"blue", b"green"]
    with store.get("Colours", 0, 0, 10, tags="*") as result:
        assert len(result.messages) == 4
    with pytest.raises(SubscriptionExpressionError, match="names no tag"):
        store.get("Colours", 0, 0, 10, tags="||")


def test_a_message_encoded_by_a_client_is_stored_as_sent(store: MessageStore) -> None:
    """The remoting front's path: the properties string, SYSFLAG and reconsume times as
    the client encoded them (0x301: a ZLIB-compressed body)."""
    encoded = b"TAGS\x01red\x02UNIQ_KEY\x01AB12\x02"
    store.put(Message("Raw", 0, b"\x78\x9c", sysflag=0x301, reconsume_times=3,
                      properties_encoded=encoded, born_host="10.0.0.1:51000",
                      born_timestamp_ms=1234))
    _wait_dispatched(store)
    with store.get("Raw", 0, 0, 1, tags="red") as result:
        [message] = result.messages
        assert (message.sysflag, message.reconsume_times, message.born_timestamp_ms) == \
            (0x301, 3, 1234)
        assert bytes(result.records[0]).endswith(len(encoded).to_bytes(2, "big") + encoded)
    refused = store.put(Message("Raw", 0, b"x", sysflag=0x10))
    assert refused.status is PutStatus.MESSAGE_ILLEGAL
    assert "host-family" in refused.reason


def test_records_only_gives_the_same_records_and_decodes_no_message(store: MessageStore) -> None:
    for index, tag in enumerate(("red", "blue", "red")):
        store.put(Message("Bytes", 0, b"m%d" % index, tags=tag))
    _wait_dispatched(store)
    for tags in (None, "red"):
        with store.get("Bytes", 0, 0, 10, tags=tags) as full, \
                store.get("Bytes", 0, 0, 10, tags=tags, records_only=True) as raw:
            assert raw.messages == []
            assert [bytes(r) for r in raw.records] == [bytes(r) for r in full.records]
            assert len(raw.records) == (3 if tags is None else 2)
            assert (raw.status, raw.next_offset) == (full.status, full.next_offset)
    with store.get("Bytes", 0, 0, 10, tags="green", records_only=True) as none:
        assert (none.status, none.records, none.next_offset) == (
            GetStatus.NO_MATCHED_MESSAGE, [], 3)
