"""kill -9 of a writer under sync flush, many times: no acknowledged message is ever lost.

Each round starts a writer process on the same directory (which recovers from the previous
kill), lets it acknowledge puts for a random while, and kills it with SIGKILL.  After every
kill the directory is opened and every acknowledged message of every round so far must be at
its acknowledged physical offset with its exact body, topic and queue offset; and the
consume queues and the index (built by in-process dispatch, killed mid-write too) must agree
with the commit log exactly: every record listed once, in order, and nothing else.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

from mqstore.storage import Message, MessageStore
from tests.conftest import small_config
from tests.processes import module_command
from tests.storage.recovery.crash_writer import PRODUCERS, body_for, key_for

KILLS = 20
REPO = Path(__file__).parents[3]


def _run_writer_and_kill(store_dir: Path, run: int, rng: random.Random) -> list[tuple[int, ...]]:
    process = subprocess.Popen([*module_command("tests.storage.recovery.crash_writer"),
                                str(store_dir), str(run)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert process.stdout is not None
    ready = process.stdout.readline()
    assert ready == b"ready\n", process.stderr.read().decode() if process.stderr else ""
    # Kill only after the first acknowledgement: on a loaded machine a fixed sleep can end
    # before the writer acknowledged anything, and such a round would test nothing.
    first_ack = process.stdout.readline()
    time.sleep(rng.uniform(0.0, 0.2))
    os.kill(process.pid, signal.SIGKILL)
    rest, _ = process.communicate(timeout=30)
    output = first_ack + rest
    assert process.returncode == -signal.SIGKILL
    acked = []
    for line in output.decode().splitlines(keepends=True):
        if line.endswith("\n"):  # a line cut by the kill was never a complete ack
            acked.append(tuple(int(field) for field in line.split()))
    return acked


def _assert_queues_and_index_match_the_log(store: MessageStore, acked: list[tuple[int, ...]],
                                           rng: random.Random) -> None:
    in_log: dict[int, list[int]] = {p: [] for p in range(PRODUCERS)}
    for message in store.iter_messages():
        in_log[message.queue_id].append(message.physical_offset)
    for producer, positions in in_log.items():
        listed: list[int] = []
        offset = 0
        while True:
            with store.get("Crash", producer, offset, 32) as result:
                listed.extend(m.physical_offset for m in result.messages)
                if not result.messages:
                    break
                offset = result.next_offset
        assert listed == positions, f"consume queue {producer} disagrees with the log"
        assert store.max_offset("Crash", producer) == len(positions)
    for acked_run, producer, sequence, physical_offset, _ in rng.sample(acked, min(20, len(acked))):
        found = store.query_by_key("Crash", key_for(acked_run, producer, sequence))
        assert [m.physical_offset for m in found] == [physical_offset]


def test_kill9_under_sync_flush_loses_no_acknowledged_message(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    rng = random.Random(20261121)
    all_acked: list[tuple[int, ...]] = []
    for run in range(KILLS):
        acked = _run_writer_and_kill(store_dir, run, rng)
        assert acked, f"round {run} acknowledged nothing before the kill"
        all_acked.extend(acked)
        with MessageStore.open(store_dir, small_config()) as store:
            for acked_run, producer, sequence, physical_offset, queue_offset in all_acked:
                stored = store.message_at(physical_offset)
                assert stored.body == body_for(acked_run, producer, sequence)
                assert (stored.topic, stored.queue_id) == ("Crash", producer)
                assert stored.queue_offset == queue_offset
            scanned = sum(1 for _ in store.iter_messages())
            assert scanned >= len(all_acked)
            per_queue = [store.next_queue_offset("Crash", p) for p in range(4)]
            assert sum(per_queue) == scanned
            _assert_queues_and_index_match_the_log(store, all_acked, rng)
    with MessageStore.open(store_dir, small_config()) as store:
        assert store.put(Message("Crash", 0, b"still writable")).ok
