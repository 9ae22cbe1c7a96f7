"""The dispatch doorbell (storage/files/doorbell.py): the writer's ring wakes the indexer."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.doorbell import Doorbell, DoorbellReceiver, doorbell_name
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

GUARD_S = 10.0
"""How long a test waits for what must happen (a hang guard, not a measured time)."""


def test_a_ring_wakes_the_receiver_and_many_rings_wake_it_once(tmp_path: Path) -> None:
    receiver = DoorbellReceiver.open(tmp_path)
    assert receiver is not None
    bell = Doorbell(tmp_path)
    try:
        assert not receiver.wait(0)  # nothing rang
        bell.ring()
        assert receiver.wait(int(GUARD_S * 1000))
        for _ in range(10_000):  # more than the queue holds: a full queue is a pending ring
            bell.ring()
        assert bell.rings_total >= 2
        assert receiver.wait(int(GUARD_S * 1000))
        while receiver.pending():  # past the most read per wake-up: one more wake-up each
            assert receiver.wait(0)
        assert not receiver.wait(0)
    finally:
        bell.close()
        receiver.close()
    assert list(tmp_path.iterdir()) == []  # nothing on the volume


def test_a_wake_from_the_indexers_own_process_ends_a_wait_from_another_thread(
        tmp_path: Path) -> None:
    receiver = DoorbellReceiver.open(tmp_path)
    assert receiver is not None
    woken = threading.Event()

    def waiter() -> None:
        if receiver.wait(int(GUARD_S * 1000 * 60)):  # past the guard: only the wake ends it
            woken.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        receiver.wake()
        assert woken.wait(GUARD_S)
    finally:
        thread.join(GUARD_S)
        receiver.close()


def test_a_writer_without_a_receiver_rings_into_nothing_and_finds_the_next_one(
        tmp_path: Path) -> None:
    bell = Doorbell(tmp_path)
    bell.ring()
    assert bell.rings_total == 0
    first = DoorbellReceiver.open(tmp_path)
    assert first is not None
    first.close()
    bell.ring()  # the receiver is gone again
    assert bell.rings_total == 0
    second = DoorbellReceiver.open(tmp_path)
    assert second is not None
    try:
        bell.ring()
        assert bell.rings_total == 1
        assert second.wait(int(GUARD_S * 1000))
    finally:
        bell.close()
        second.close()


def test_each_store_has_its_own_doorbell_and_a_taken_one_leaves_dispatch_polling(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert doorbell_name(tmp_path / "a") != doorbell_name(tmp_path / "b")
    first = DoorbellReceiver.open(tmp_path / "a")
    assert first is not None
    try:
        with caplog.at_level(logging.WARNING):
            assert DoorbellReceiver.open(tmp_path / "a") is None
        assert "dispatch polls `positions` instead" in caplog.text
    finally:
        first.close()


def test_an_indexer_process_dispatches_at_the_writers_ring_not_at_its_poll(
        tmp_path: Path) -> None:
    """The indexer's idle poll is set past the guard: only the ring can start its pass."""
    polls_never_ms = int(GUARD_S * 1000 * 60)
    with MessageStore.open(tmp_path, writer_config()) as writer, \
            Indexer.open(tmp_path, indexer_config(dispatch_doorbell_poll_ms=polls_never_ms)
                         ) as indexer:
        for number in range(3):
            result = writer.put(Message("Bell", 0, f"m{number}".encode()))
            assert result.ok
            wait_dispatched(indexer, result.physical_offset + result.size_bytes,
                            timeout_s=GUARD_S)
        assert indexer.queues.get("Bell", 0) is not None
        assert indexer.queues.get("Bell", 0).max_offset == 3  # type: ignore[union-attr]


def test_an_indexer_process_waiting_on_its_doorbell_stops_at_once(tmp_path: Path) -> None:
    """The stop is a ring from within: the dispatch thread's long poll does not hold it."""
    polls_never_ms = int(GUARD_S * 1000 * 60)
    indexer = Indexer.open(tmp_path, indexer_config(dispatch_doorbell_poll_ms=polls_never_ms))
    stopped = threading.Thread(target=indexer.close)
    stopped.start()
    stopped.join(GUARD_S)
    assert not stopped.is_alive()


def test_a_caller_that_publishes_its_puts_itself_neither_wakes_the_thread_nor_delays_dispatch(
        tmp_path: Path) -> None:
    """The writer service's way (services/writer/produce.py): `caller_publishes` around the
    put, then `publish_now` (and `ring_unrung` when it says).  The publisher's own wait is
    set past the guard, and so is the indexer's poll: the positions and the ring come from
    the caller alone."""
    never_ms = int(GUARD_S * 1000 * 60)
    ring_interval_ms = 100  # the writer's dispatch_interval_ms: rings at most this often
    with MessageStore.open(tmp_path, writer_config(positions_publish_interval_ms=never_ms,
                                                   dispatch_interval_ms=ring_interval_ms)
                           ) as writer, \
            Indexer.open(tmp_path, indexer_config(dispatch_doorbell_poll_ms=never_ms)
                         ) as indexer:
        publisher = writer.positions_publisher
        assert publisher is not None
        time.sleep(ring_interval_ms * 1.1 / 1000)  # the thread's first ring is old; it waits
        for number in range(3):
            publisher.caller_publishes = True
            try:
                result = writer.put(Message("Caller", 0, f"m{number}".encode()))
            finally:
                publisher.caller_publishes = False
            assert result.ok
            assert not publisher.wakeup_pending()  # the put did not wake the thread
            assert publisher.publish_now() is None  # rung at once: the last ring is old
            end = result.physical_offset + result.size_bytes
            found = publisher.file.read()
            assert found is not None and found[1]["committed_position"] == end
            wait_dispatched(indexer, end, timeout_s=GUARD_S)
            time.sleep(ring_interval_ms * 1.1 / 1000)  # the next publish rings at once
        # Two publishes within the interval: the second is left for the caller.
        for _ in range(2):
            publisher.caller_publishes = True
            try:
                result = writer.put(Message("Caller", 0, b"close"))
            finally:
                publisher.caller_publishes = False
            ring_in_s = publisher.publish_now()
        assert ring_in_s is not None
        assert 0 <= ring_in_s <= ring_interval_ms / 1000
        time.sleep(ring_in_s)
        publisher.ring_unrung()
        wait_dispatched(indexer, result.physical_offset + result.size_bytes, timeout_s=GUARD_S)


def test_a_wake_after_the_receiver_closed_is_nothing(tmp_path: Path) -> None:
    receiver = DoorbellReceiver.open(tmp_path)
    assert receiver is not None
    receiver.close()
    receiver.wake()  # a late wakeup from the indexer's process: no thread to wake, no error
