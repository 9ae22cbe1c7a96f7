"""kill -9 of the indexer mid-dispatch, many times: after each restart its consume queues
match the commit log exactly (no missing entry, no phantom, no duplicate)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.watermarks import DispatchedFile
from tests.processes import module_command
from tests.storage.dispatch.split_helpers import (
    indexer_config,
    log_records,
    queue_entries,
    wait_dispatched,
    writer_config,
)

KILLS = 12
REPO = Path(__file__).parents[3]


def test_indexer_survives_kill9_mid_dispatch(store_dir: Path) -> None:
    rng = random.Random(9)
    behind_at_kill = []
    with MessageStore.open(store_dir, writer_config()) as writer:
        for round_number in range(KILLS):
            for n in range(1500):  # new records each round: every kill lands mid-dispatch
                writer.put(Message(f"T{n % 3}", (n + round_number) % 7,
                                   rng.randbytes(rng.randrange(1, 300))))
            _start_and_kill(store_dir, rng)
            behind_at_kill.append(_dispatched_position(store_dir) < writer.committed_position)
        end = writer.committed_position
    assert (store_dir / "indexer.abort").exists()
    assert sum(behind_at_kill) >= KILLS // 2, behind_at_kill  # the kills did interrupt work
    with Indexer.open(store_dir, indexer_config()) as indexer:
        wait_dispatched(indexer, end)
    assert queue_entries(store_dir) == log_records(store_dir)


def _start_and_kill(store_dir: Path, rng: random.Random) -> None:
    process = subprocess.Popen([*module_command("tests.storage.dispatch.indexer_proc"),
                                str(store_dir)], cwd=REPO, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    ready = process.stdout.readline()
    assert ready == b"ready\n", process.communicate()[1].decode()
    time.sleep(rng.uniform(0.0, 0.05))
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL


def _dispatched_position(store_dir: Path) -> int:
    dispatched = DispatchedFile(store_dir / "dispatched", writable=False)
    try:
        found = dispatched.read()
        return found[1]["dispatched_position"] if found else 0
    finally:
        dispatched.close()
