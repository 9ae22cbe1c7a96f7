"""Dispatch's runs (storage/dispatch/dispatcher.py, `_dispatch_run`): each queue's records
of a run put in one call (`ConsumeQueue.put_streak`) and the run's index keys in one more,
against every record put on its own, in log order, as dispatch did before -- byte-identical
consume queue and index files, the same notices, damage, holes, stalls and counters.

The log mixes batches of one queue (long streaks; some with tags, keys and unique keys, as
RocketMQ's clients send) with single messages of every kind dispatch treats apart (tags,
keys, delays, transaction records) spread over the queues; queue files are small and reserve
one page at a time, so streaks meet file rolls and reservations, and index files hold 199
keys, so runs meet index rolls.  Each log is
dispatched in passes of random sizes, then again from a random earlier position over the
reopened queues (duplicates), in both ways; one queue's reservation fails (a stall).
"""

from __future__ import annotations

import errno
import random
import shutil
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore, StoreConfig
from mqstore.storage.dispatch.dispatcher import Dispatcher
from mqstore.storage.files.consume_queue_file import ConsumeQueueFile
from mqstore.storage.format import volume
from mqstore.storage.format.dispatch_scan import DispatchRecord
from mqstore.storage.format.record import SysFlag
from mqstore.storage.queues.consume_queue import ConsumeQueue
from tests.storage.dispatch.dispatch_helpers import damage, dispatch, store_files

SEGMENT_BYTES = 64 * 1024
CONFIG = StoreConfig.for_small_segments(SEGMENT_BYTES, dispatch_enabled=False,
                                        index_count_max=200,
                                        consume_queue_file_size_bytes=20 * 300,
                                        consume_queue_allocate_step_bytes=4096)
"""300 entries a queue file, 204 reserved at a time."""
FAILING_QUEUE = ("TopicA", 1)


def _single(rng: random.Random, number: int) -> Message:
    topic, queue_id = rng.choice(["TopicA", "TopicB"]), rng.randrange(2)
    kind = rng.choice(["plain"] * 6 + ["tags", "keys", "delay", "prepared"])
    if kind == "tags":
        return Message(topic, queue_id, b"t", tags="TagA")
    if kind == "keys":
        return Message(topic, queue_id, b"k", keys=[f"k{number}"])
    if kind == "delay":
        return Message(topic, queue_id, b"d", properties={"DELAY": "1"})
    if kind == "prepared":
        return Message(topic, queue_id, b"p", sysflag=int(SysFlag.TRANSACTION_PREPARED))
    return Message(topic, queue_id, bytes(rng.randrange(40)))


def _batched(rng: random.Random, topic: str, queue_id: int, number: int,
             entry: int) -> Message:
    if number % 2:
        return Message(topic, queue_id, bytes(rng.randrange(30)))
    return Message(topic, queue_id, b"r", tags=rng.choice(["TagA", "TagB", None]),
                   keys=rng.choice([[], [f"order{number}", f"user{entry}"]]),
                   properties={"UNIQ_KEY": f"{number:08X}{entry:04X}"})


def _one_at_a_time(self: Dispatcher, run: list[DispatchRecord],
                   notices: dict[tuple[str, int], int]) -> None:
    """Dispatch as it was before runs: each record on its own, in log order."""
    for whole in run:
        self._dispatch_fields(whole, notices)
        self.dispatched_position += whole.total_size


def _write_log(directory: Path, rng: random.Random, *,
               damaged: bool) -> tuple[int, list[int]]:
    """The log's end and the positions of its records (some `damaged`)."""
    store = MessageStore.open(directory, CONFIG)
    positions: list[int] = []
    try:
        for number in range(rng.randrange(150, 250)):
            if rng.random() < 0.4:
                topic, queue_id = rng.choice([("TopicA", 0), FAILING_QUEUE, ("TopicB", 0)])
                results = store.put_batch([_batched(rng, topic, queue_id, number, entry)
                                           for entry in range(rng.randrange(1, 40))])
            else:
                results = [store.put(_single(rng, number))]
            for result in results:
                assert result.ok, result.reason
                positions.append(result.physical_offset)
        end = store.committed_position
    finally:
        store.close()
    if damaged:
        damage(directory, positions, rng, segment_bytes=SEGMENT_BYTES)
    return end, positions


def _failing_reservation(monkeypatch: pytest.MonkeyPatch) -> None:
    """FAILING_QUEUE's first reservation past what its first file reserved fails (EIO): the
    queue stalls there."""
    calls: list[Path] = []
    reserve = ConsumeQueueFile.allocate_through

    def allocate_through(self: ConsumeQueueFile, end_position: int) -> None:
        if self.path.parent.parent.name == FAILING_QUEUE[0] and \
                self.path.parent.name == str(FAILING_QUEUE[1]):
            calls.append(self.path)
            if len(calls) == 1:
                raise OSError(errno.EIO, "injected")
        reserve(self, end_position)

    monkeypatch.setattr(ConsumeQueueFile, "allocate_through", allocate_through)


@pytest.mark.parametrize("seed", range(8))
def test_streaks_dispatch_byte_for_byte_as_one_record_at_a_time(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    written = tmp_path / "written"
    end, positions = _write_log(written, rng, damaged=seed % 2 == 1)
    passes = [rng.choice([1, 3, 40, 10_000]) for _ in range(4)]
    again = rng.choice(positions)
    streak_writes: list[int] = []
    put_streak = ConsumeQueue.put_streak

    def counted(self: ConsumeQueue, records: list[DispatchRecord], first: int, end: int,
                tags_codes: list[int] | None) -> int:
        streak_writes.append(put_streak(self, records, first, end, tags_codes))
        return streak_writes[-1]

    monkeypatch.setattr(ConsumeQueue, "put_streak", counted)
    outcomes = []
    for name in ("streaks", "one at a time"):
        if name != "streaks":
            monkeypatch.setattr(Dispatcher, "_dispatch_run", _one_at_a_time)
        with monkeypatch.context() as failing:
            if seed % 4 == 3:
                _failing_reservation(failing)
            directory = tmp_path / name
            shutil.copytree(written / volume.COMMITLOG_DIRECTORY,
                            directory / volume.COMMITLOG_DIRECTORY)
            first = dispatch(directory, CONFIG, end, passes)
            files = store_files(directory)
            repeated = dispatch(directory, CONFIG, end, passes[::-1], start=again)
        outcomes.append((first, files, repeated, store_files(directory)))
    assert outcomes[0] == outcomes[1]
    assert sum(streak_writes) > 100  # the streaks were put in one call each, not one by one
    stalled = outcomes[0][0][7]
    assert isinstance(stalled, dict)
    assert (FAILING_QUEUE in stalled) == (seed % 4 == 3)
