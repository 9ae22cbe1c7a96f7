"""Topic names of 1..255 bytes, of every legal character, through the whole engine: put
(single and batch), dispatch into consume queues of several files and the index, pull, key
lookup, reopen, and retention moving the log's start under long-topic queues.

Issue 26: a 255-byte topic's consume queue file name in creating/ was 300 bytes (OSError 36)
and dispatch stopped for every topic.  Hypothesis is derandomized (the same examples every
run) and bounded (`max_examples`); the explicit examples always run the boundary lengths.
"""

from __future__ import annotations

import datetime
import os
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mqstore.storage import Message, MessageStore, RecoveryMode
from mqstore.storage.format.topic import LEGAL_TOPIC_CHARACTERS
from mqstore.storage.format.volume import CONSUME_QUEUE_DIRECTORY
from tests.conftest import SMALL_SEGMENT_BYTES
from tests.storage.topic_names import (
    BOUNDARY_LENGTHS,
    CONSUME_QUEUE_ENTRIES_PER_FILE,
    QUEUE_COUNT,
    TOPIC_SIZE_BYTES_MAX,
    Sent,
    by_queue,
    check_store,
    config,
    every_character_topic,
    put_messages,
    wait_dispatched,
)

TOPIC_NAMES = st.integers(1, TOPIC_SIZE_BYTES_MAX).flatmap(
    lambda length: st.text(alphabet=LEGAL_TOPIC_CHARACTERS, min_size=length, max_size=length))
"""Lengths drawn evenly (plain st.text stays short), then any legal characters."""


@settings(max_examples=30, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@example(topics=[every_character_topic(n, seed=n) for n in BOUNDARY_LENGTHS], seed=0)
@example(topics=["%" * 255, "|" * 255, "-" * 128, "_" * 127], seed=1)
@given(topics=st.lists(TOPIC_NAMES, min_size=1, max_size=5, unique=True),
       seed=st.integers(0, 2**32 - 1))
def test_any_topic_name_is_put_dispatched_pulled_and_found(topics: list[str],
                                                           seed: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "store"
        with MessageStore.open(directory, config()) as store:
            sent = put_messages(store, topics, seed=seed, per_queue_max=20)
            wait_dispatched(store)
            check_store(store, sent)
        with MessageStore.open(directory, config()) as store:
            assert store.recovery_report.mode is RecoveryMode.NORMAL
            check_store(store, sent)
        for topic in topics:  # RocketMQ's layout: consumequeue/<topic>/<queue id>/<start>
            assert sorted(p.name for p in (directory / CONSUME_QUEUE_DIRECTORY / topic)
                          .iterdir()) == [str(q) for q in range(QUEUE_COUNT)]
        assert list((directory / "creating").iterdir()) == []


A_DELETE_HOUR = datetime.datetime(2026, 11, 21, 4, 0)
DAY_S = 24 * 3600
RETENTION = config(clean_interval_ms=3_600_000, file_retention_hours=72, flush_interval_ms=10,
                   flush_pages_min=0)


def _expire_old_segments(directory: Path, topics: list[str]) -> tuple[list[Sent], int]:
    """Five segments of messages to every queue, the old ones aged past retention and
    deleted at a delete hour (as in tests/storage/log/test_retention.py); checks the store
    then.  Returns what was sent and the log's new start."""
    with MessageStore.open(directory, RETENTION) as store:
        sent: list[Sent] = []
        while store.segment_count < 5 or store.written_position % SMALL_SEGMENT_BYTES < 4096:
            sent += put_messages(store, topics, seed=len(sent), per_queue_max=3,
                                 body_bytes_max=1500)
        wait_dispatched(store)
        time.sleep(0.05)  # the async flush syncs every 10 ms
        longest_queue = directory / CONSUME_QUEUE_DIRECTORY / topics[-1] / "0"
        files_before = len(list(longest_queue.iterdir()))
        past = time.time() - 4 * DAY_S
        for path in (directory / "commitlog").iterdir():
            os.utime(path, (past, past))
        store._wiring.retention._disk_usage = lambda path: 0.40
        removed = store._wiring.retention.clean(now=A_DELETE_HOUR)
        assert len(removed) >= 3
        start = store.min_position
        assert start == removed[-1].end_position
        assert all(store.min_offset(topic, 0) > 0 for topic in topics)
        check_store(store, sent, min_position=start)
        assert len(list(longest_queue.iterdir())) < files_before
        for topic in topics:  # the first file left holds the queue's first offset
            for queue_id in range(QUEUE_COUNT):
                names = (directory / CONSUME_QUEUE_DIRECTORY / topic / str(queue_id)).iterdir()
                first = min(int(path.name) for path in names) // 20
                assert first <= store.min_offset(topic, queue_id) <= \
                    first + CONSUME_QUEUE_ENTRIES_PER_FILE, (len(topic), queue_id)
    assert len(by_queue(sent)) == len(topics) * QUEUE_COUNT
    return sent, start


def test_retention_moves_the_start_of_long_topic_queues_and_their_index(tmp_path: Path
                                                                        ) -> None:
    """Every queue of every length starts at its first message at or above the log's new
    start, its consume queue files wholly below it are deleted, and the index finds no key
    below it.  After a reopen every queue still ends where it did: a queue whose every
    record expired is not taken for one with a torn last entry (its end would drop below
    the writer's count, storage/dispatch/torn_tail.py)."""
    directory = tmp_path / "store"
    topics = [every_character_topic(n, seed=n) for n in BOUNDARY_LENGTHS]
    sent, start = _expire_old_segments(directory, topics)
    with MessageStore.open(directory, RETENTION) as store:
        assert store.min_position == start
        wait_dispatched(store)
        check_store(store, sent, min_position=start, check_min_offsets=False)
        fully_expired = [key for key, messages in by_queue(sent).items()
                         if messages[-1].physical_offset < start]
        assert fully_expired, "no queue whose every record expired"
        put = store.put(Message(*fully_expired[0], b"after the reopen"))
        assert put.queue_offset == len(by_queue(sent)[fully_expired[0]])


def test_after_a_reopen_queues_start_at_the_log_start(tmp_path: Path) -> None:
    """A reopened queue starts at its first entry at or above the log's start, not at its
    first file's first entry (Indexer.resume follows the log's start, as RocketMQ's
    correctMinOffset does at load): before, min_offset answered entries whose segments
    retention had deleted."""
    directory = tmp_path / "store"
    topics = [every_character_topic(n, seed=n) for n in (1, 128, 255)]
    sent, start = _expire_old_segments(directory, topics)
    with MessageStore.open(directory, RETENTION) as store:
        wait_dispatched(store)
        check_store(store, sent, min_position=start)
