"""The dispatch doorbell (storage/files/doorbell.py): the writer's ring wakes the indexer."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.doorbell import Doorbell, DoorbellListener, doorbell_name
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

GUARD_S = 10.0
"""How long a test waits for what must happen (a hang guard, not a measured time)."""


class Rings:
    def __init__(self) -> None:
        self.count = 0
        self.event = threading.Event()

    def __call__(self) -> None:
        self.count += 1
        self.event.set()


def test_a_ring_wakes_the_listener_and_many_rings_wake_it_at_most_as_often(
        tmp_path: Path) -> None:
    rings = Rings()
    listener = DoorbellListener.open(tmp_path, rings)
    assert listener is not None
    bell = Doorbell(tmp_path)
    try:
        bell.ring()
        assert rings.event.wait(GUARD_S)
        for _ in range(10_000):  # more than the queue holds: a full queue is a pending ring
            bell.ring()
        assert bell.rings_total >= 1
    finally:
        bell.close()
        listener.close()
    assert 1 <= rings.count <= 10_001
    assert list(tmp_path.iterdir()) == []  # nothing on the volume


def test_a_writer_without_a_listener_rings_into_nothing_and_finds_the_next_one(
        tmp_path: Path) -> None:
    bell = Doorbell(tmp_path)
    bell.ring()
    assert bell.rings_total == 0
    first = DoorbellListener.open(tmp_path, Rings())
    assert first is not None
    first.close()
    bell.ring()  # the listener is gone again
    assert bell.rings_total == 0
    rings = Rings()
    second = DoorbellListener.open(tmp_path, rings)
    assert second is not None
    try:
        bell.ring()
        assert bell.rings_total == 1
        assert rings.event.wait(GUARD_S)
    finally:
        bell.close()
        second.close()


def test_each_store_has_its_own_doorbell_and_a_taken_one_leaves_dispatch_polling(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert doorbell_name(tmp_path / "a") != doorbell_name(tmp_path / "b")
    first = DoorbellListener.open(tmp_path / "a", Rings())
    assert first is not None
    try:
        with caplog.at_level(logging.WARNING):
            assert DoorbellListener.open(tmp_path / "a", Rings()) is None
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
