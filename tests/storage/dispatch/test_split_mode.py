"""Writer and indexer as two parties on one directory (here in one process, through files
only: the indexer learns everything from `positions` and the commit log)."""

from __future__ import annotations

import contextlib
import random
import shutil
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.storage.dispatch.split_helpers import (
    indexer_config,
    log_records,
    lose_log_tail,
    queue_entries,
    wait_dispatched,
    writer_config,
)

TOPICS = ("Orders", "Audit")


def _produce(store: MessageStore, count: int, rng: random.Random, *,
             key_prefix: str = "k") -> None:
    for n in range(count):
        body = rng.randbytes(rng.randrange(1, 900))
        message = Message(rng.choice(TOPICS), rng.randrange(4), body,
                          keys=[f"{key_prefix}{n}"])
        assert store.put(message).ok


def test_indexer_builds_exactly_the_queues_of_the_log(store_dir: Path) -> None:
    rng = random.Random(1)
    notices: list[dict[tuple[str, int], int]] = []
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config(), listener=notices.append) as indexer:
        _produce(writer, 1500, rng)  # several 64 KiB segments
        wait_dispatched(indexer, writer.committed_position)
        assert indexer.dispatch_behind_bytes == 0
        assert not (store_dir / "consumequeue").exists() or writer.max_offset("Orders", 0) == 0
    expected = log_records(store_dir)
    assert queue_entries(store_dir) == expected
    last_notice: dict[tuple[str, int], int] = {}
    for batch in notices:
        last_notice.update(batch)
    assert last_notice == {key: len(entries) for key, entries in expected.items()}


def test_writer_reopen_continues_queue_offsets_from_the_indexer(store_dir: Path) -> None:
    rng = random.Random(2)
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        _produce(writer, 600, rng)
        wait_dispatched(indexer, writer.committed_position)
    for _ in range(2):  # with the indexer's `dispatched` file, then after it
        with MessageStore.open(store_dir, writer_config()) as writer:
            _produce(writer, 300, rng)
    with Indexer.open(store_dir, indexer_config()) as indexer:
        wait_dispatched(indexer, indexer.published["committed_position"]
                        if indexer.published else 1)
    expected = log_records(store_dir)  # asserts queue offsets 0, 1, 2, ... per queue
    assert queue_entries(store_dir) == expected


def test_writer_without_any_indexer_scans_the_log_for_offsets(store_dir: Path) -> None:
    rng = random.Random(3)
    for _ in range(3):
        with MessageStore.open(store_dir, writer_config()) as writer:
            _produce(writer, 200, rng)
    assert not (store_dir / "dispatched").exists()
    log_records(store_dir)  # queue offsets continue across reopens


@pytest.mark.parametrize("first", ["writer", "indexer"])
def test_queue_offsets_are_right_whichever_starts_first_after_the_queues_are_lost(
        store_dir: Path, first: str) -> None:
    """The two containers of a pod start in no set order.  With `consumequeue/` deleted,
    neither a writer that starts before the indexer rebuilt it nor one that starts after
    reuses a queue offset: the writer counts from its own snapshot (`queue-offsets`)."""
    rng = random.Random(5)
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        _produce(writer, 600, rng)
        wait_dispatched(indexer, writer.committed_position)
    shutil.rmtree(store_dir / "consumequeue")
    with contextlib.ExitStack() as stack:
        if first == "indexer":
            indexer = stack.enter_context(Indexer.open(store_dir, indexer_config()))
            writer = stack.enter_context(MessageStore.open(store_dir, writer_config()))
        else:
            writer = stack.enter_context(MessageStore.open(store_dir, writer_config()))
            indexer = stack.enter_context(Indexer.open(store_dir, indexer_config()))
        _produce(writer, 300, rng, key_prefix="after")
        wait_dispatched(indexer, writer.committed_position)
    expected = log_records(store_dir)  # asserts queue offsets 0, 1, 2, ... per queue
    assert sum(map(len, expected.values())) == 900
    assert queue_entries(store_dir) == expected


def test_new_writer_generation_below_dispatch_cuts_the_queues(store_dir: Path) -> None:
    """A machine crash lost committed bytes the indexer had dispatched: the next writer
    recovers to a shorter log, and the indexer cuts back and re-dispatches the new records."""
    rng = random.Random(4)
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        _produce(writer, 800, rng)
        wait_dispatched(indexer, writer.committed_position)
        lost_from = writer.committed_position - 20_000
        generation = indexer.writer_generation
        writer.close()
        lose_log_tail(store_dir, lost_from)
        with MessageStore.open(store_dir, writer_config()) as second:
            assert second.committed_position < lost_from + 2000
            recovered_end = second.committed_position
            _produce(second, 300, rng, key_prefix="second-")
            wait_dispatched(indexer, second.committed_position)
            assert indexer.writer_generation != generation
            # The rewritten records sit below where the index had got to: each must be
            # indexed again and found by its key.
            assert indexer.index is not None
            rewritten = list(second.iter_messages(recovered_end))
            assert len(rewritten) == 300
            for stored in rewritten:
                found = indexer.index.query(topic=stored.topic, key=stored.keys[0], begin_ms=0,
                                            end_ms=2**62, max_results=10,
                                            key_matches=lambda _offset: True)
                assert stored.physical_offset in found, stored.keys
    assert queue_entries(store_dir) == log_records(store_dir)

