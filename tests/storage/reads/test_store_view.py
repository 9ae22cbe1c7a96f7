"""StoreView: a read-only view of a directory a writer and an indexer write (here both run in
the test's process, but the view learns everything from files and notices)."""

from __future__ import annotations

import datetime
import hashlib
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.storage import GetStatus, Message, MessageStore, NoRecordError
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consume_queue_file import ENTRY
from mqstore.storage.reads.store_view import StoreView
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

Row = tuple[int, int, bytes, str | None, tuple[str, ...]]
"""(queue offset, physical offset, body, tags, keys) of one message."""


def _produce(store: MessageStore, count: int, rng: random.Random, *,
             topics: tuple[str, ...] = ("Orders", "Audit"), queues: int = 3,
             first_key: int = 0) -> None:
    for n in range(first_key, first_key + count):
        message = Message(rng.choice(topics), rng.randrange(queues),
                          rng.randbytes(rng.randrange(1, 900)), tags=rng.choice(["a", "b"]),
                          keys=[f"k{n}"])
        assert store.put(message).ok


def _expected(store: MessageStore) -> dict[tuple[str, int], list[Row]]:
    rows: dict[tuple[str, int], list[Row]] = {}
    for message in store.iter_messages():
        rows.setdefault((message.topic, message.queue_id), []).append(
            (message.queue_offset, message.physical_offset, bytes(message.body), message.tags,
             message.keys))
    return rows


def _pulled(view: StoreView, topic: str, queue_id: int) -> list[Row]:
    rows: list[Row] = []
    offset = view.min_offset(topic, queue_id)
    while offset < view.max_offset(topic, queue_id):
        with view.get(topic, queue_id, offset, 32) as result:
            assert result.status is GetStatus.FOUND, result
            rows += [(m.queue_offset, m.physical_offset, bytes(m.body), m.tags, m.keys)
                     for m in result.messages]
            offset = result.next_offset
    return rows


def _advance_until(view: StoreView, notices: list[dict[tuple[str, int], int]],
                   total: int) -> None:
    """Feed the listener's notices to the view until its queues hold `total` entries
    (dispatch hands a pass's notice to the listener just after it moves its position)."""
    deadline = time.monotonic() + 20
    while sum(info.max_offset - info.min_offset for info in view.queues()) < total:
        assert time.monotonic() < deadline, "the notices never covered every message"
        while notices:
            view.advance(notices.pop(0))
        time.sleep(0.005)


def _wait_refreshed(view: StoreView, position: int) -> None:
    deadline = time.monotonic() + 20
    while view.dispatched_position < position:
        assert time.monotonic() < deadline, "the indexer never published `dispatched`"
        time.sleep(0.01)
        view.refresh()


@pytest.fixture
def writer(store_dir: Path) -> Iterator[MessageStore]:
    with MessageStore.open(store_dir, writer_config(
            flush_interval_ms=10, flush_pages_min=0, positions_publish_interval_ms=20,
            clean_interval_ms=3_600_000, delete_segments_per_pass_max=1000)) as store:
        yield store


def test_notices_make_exactly_the_logs_messages_readable(store_dir: Path,
                                                          writer: MessageStore) -> None:
    notices: list[dict[tuple[str, int], int]] = []
    with Indexer.open(store_dir, indexer_config(), listener=notices.append) as indexer, \
            StoreView.open(store_dir, indexer_config()) as view:
        _produce(writer, 1200, random.Random(1))  # about 10 segments of 64 KiB
        wait_dispatched(indexer, writer.committed_position)
        _advance_until(view, notices, 1200)
        expected = _expected(writer)
        assert {(info.topic, info.queue_id): info.max_offset for info in view.queues()} \
            == {key: len(rows) for key, rows in expected.items()}
        for (topic, queue_id), rows in expected.items():
            assert _pulled(view, topic, queue_id) == rows
        assert [m.physical_offset for m in view.iter_messages()] == \
            [m.physical_offset for m in writer.iter_messages()]


def test_refresh_alone_vouches_only_what_dispatched_covers(store_dir: Path,
                                                           writer: MessageStore) -> None:
    rng = random.Random(2)
    with StoreView.open(store_dir, indexer_config()) as view:
        with Indexer.open(store_dir, indexer_config()) as indexer:
            _produce(writer, 600, rng)
            wait_dispatched(indexer, writer.committed_position)
            _wait_refreshed(view, writer.committed_position)
        expected = _expected(writer)
        assert {(i.topic, i.queue_id): i.max_offset for i in view.queues()} == \
            {key: len(rows) for key, rows in expected.items()}
        _produce(writer, 300, rng)  # no indexer: no entries, nothing vouched
        view.refresh()
        assert {(i.topic, i.queue_id): i.max_offset for i in view.queues()} == \
            {key: len(rows) for key, rows in expected.items()}
        for (topic, queue_id), rows in expected.items():
            assert _pulled(view, topic, queue_id) == rows


def test_queue_files_appear_as_the_queue_grows(store_dir: Path, writer: MessageStore) -> None:
    notices: list[dict[tuple[str, int], int]] = []
    with Indexer.open(store_dir, indexer_config(), listener=notices.append) as indexer, \
            StoreView.open(store_dir, indexer_config()) as view:
        assert view.queues() == []
        rng = random.Random(3)
        for round_number in range(1, 6):  # 2,500 entries: three 1,024-entry files
            _produce(writer, 500, rng, topics=("One",), queues=1)
            wait_dispatched(indexer, writer.committed_position)
            _advance_until(view, notices, 500 * round_number)
        assert len(list((store_dir / "consumequeue" / "One" / "0").iterdir())) == 3
        assert view.max_offset("One", 0) == 2500
        assert _pulled(view, "One", 0) == _expected(writer)["One", 0]


def _age_segments(store_dir: Path) -> None:
    past = time.time() - 4 * 24 * 3600
    for path in (store_dir / "commitlog").iterdir():
        os.utime(path, (past, past))


def test_retention_deletes_old_files_but_never_a_held_read(store_dir: Path,
                                                           writer: MessageStore) -> None:
    notices: list[dict[tuple[str, int], int]] = []
    with Indexer.open(store_dir, indexer_config(), listener=notices.append) as indexer, \
            StoreView.open(store_dir, indexer_config()) as view:
        _produce(writer, 2500, random.Random(4), topics=("R",), queues=1)
        _produce(writer, 10, random.Random(5), topics=("Late",), queues=1, first_key=9000)
        wait_dispatched(indexer, writer.committed_position)
        _advance_until(view, notices, 2510)
        expected = _expected(writer)["R", 0]
        held = view.get("R", 0, 0, 32)
        assert [bytes(m.body) for m in held.messages] == [row[2] for row in expected[:32]]
        time.sleep(0.05)  # flushed every 10 ms: retention deletes flushed segments only
        _age_segments(store_dir)
        removed = writer._wiring.retention.clean(now=datetime.datetime(2026, 11, 21, 4, 0))
        assert len(removed) > 20
        queue_directory = store_dir / "consumequeue" / "R" / "0"
        # The indexer follows the writer's deletions, and the view reads the log's start from
        # what the writer publishes, which may lag the deletions by a publish interval.
        deadline = time.monotonic() + 20
        while True:
            view.refresh()
            if (len(list(queue_directory.iterdir())) < 3
                    and view.log.min_position == writer.min_position):
                break
            assert time.monotonic() < deadline, (view.log.min_position, writer.min_position)
            time.sleep(0.01)
        # Its first file (offsets 0-1023) is gone; where the log now starts depends on how many
        # segments were flushed in time to be deleted, so the second file may be read whole.
        assert view.min_offset("R", 0) >= 1024
        with view.get("R", 0, 0, 1) as result:
            assert result.status is GetStatus.OFFSET_TOO_SMALL
            assert result.next_offset == view.min_offset("R", 0)
        # The read taken before retention still reads its bodies from its mappings.
        assert [bytes(m.body) for m in held.messages] == [row[2] for row in expected[:32]]
        held.release()
        with pytest.raises(NoRecordError):
            view.message_at(expected[0][1])
        # What is served is the queue's tail, whole; under load the indexer may still be
        # deleting the files of the next flushed segments, so the tail may start later.
        first = view.min_offset("R", 0)
        pulled = _pulled(view, "R", 0)
        assert pulled and pulled[0][0] >= first
        assert pulled == [row for row in expected if row[0] >= pulled[0][0]]


def test_a_torn_last_entry_is_not_trusted(store_dir: Path, writer: MessageStore) -> None:
    with Indexer.open(store_dir, indexer_config()) as indexer:
        _produce(writer, 300, random.Random(6), topics=("T",), queues=1)
        wait_dispatched(indexer, writer.committed_position)
    count = len(_expected(writer)["T", 0])
    queue_file = store_dir / "consumequeue" / "T" / "0" / f"{0:020d}"
    with open(queue_file, "r+b") as raw:  # what a reader can see in the middle of a write:
        raw.seek(count * ENTRY.size)      # the high bytes of the position, not the rest
        raw.write(ENTRY.pack(0, 1 << 16, 0))
    with StoreView.open(store_dir, indexer_config()) as view:
        assert view.max_offset("T", 0) == count


def test_lookups_by_position_key_and_time(store_dir: Path, writer: MessageStore) -> None:
    notices: list[dict[tuple[str, int], int]] = []
    with Indexer.open(store_dir, indexer_config(), listener=notices.append) as indexer, \
            StoreView.open(store_dir, indexer_config()) as view:
        _produce(writer, 400, random.Random(7))
        wait_dispatched(indexer, writer.committed_position)
        _advance_until(view, notices, 400)
        messages = list(writer.iter_messages())
        chosen = messages[123]
        found = view.message_at(chosen.physical_offset)
        assert (found.topic, found.queue_offset, found.body) == (chosen.topic,
                                                                  chosen.queue_offset,
                                                                  chosen.body)
        by_key = view.query_by_key(chosen.topic, "k123")
        assert [m.physical_offset for m in by_key] == [chosen.physical_offset]
        assert view.query_by_key("Nope" if chosen.topic != "Nope" else "X", "k123") == []
        with pytest.raises(NoRecordError):
            view.message_at(chosen.physical_offset + 1)
        queue = [m for m in messages if (m.topic, m.queue_id) == (chosen.topic,
                                                                   chosen.queue_id)]
        offset = view.offset_by_time(chosen.topic, chosen.queue_id,
                                         chosen.store_timestamp_ms)
        assert queue[offset].store_timestamp_ms >= chosen.store_timestamp_ms
        assert offset == 0 or queue[offset - 1].store_timestamp_ms < chosen.store_timestamp_ms


def _tree(directory: Path) -> dict[str, tuple[int, int, str]]:
    return {str(path.relative_to(directory)): (path.stat().st_size, path.stat().st_mtime_ns,
                                               hashlib.sha256(path.read_bytes()).hexdigest())
            for path in sorted(directory.rglob("*")) if path.is_file()}


def test_a_follower_takes_no_lock_and_writes_nothing(store_dir: Path) -> None:
    with MessageStore.open(store_dir, writer_config()) as store, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        _produce(store, 300, random.Random(8))
        wait_dispatched(indexer, store.committed_position)
    before = _tree(store_dir)
    with StoreView.open(store_dir, indexer_config()) as view:
        assert sum(info.max_offset for info in view.queues()) == 300
        for info in view.queues():
            _pulled(view, info.topic, info.queue_id)
        view.query_by_key("Orders", "k7")
        view.refresh()
    assert _tree(store_dir) == before
