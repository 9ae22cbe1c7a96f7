"""kill -9 of a writer delivering timer messages, mid-slot and between checkpoints: after
the restart every message is delivered exactly once (services/writer/timer_recovery.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

from mqstore.storage import MessageStore
from tests.processes import module_command
from tests.storage.dispatch.split_helpers import writer_config

REPO = Path(__file__).parents[2]
COUNT = 300
CHILD = "tests.services.timer_child"
KILL_AFTER = COUNT // 2 + 10
"""Ten copies into the third of four slots of 75: the kill lands mid-slot."""


def _child(directory: Path, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen([*module_command(CHILD), str(directory), str(count)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _delivered_copies(directory: Path) -> Counter[str]:
    with MessageStore.open(directory, writer_config()) as store:
        return Counter(message.properties["UNIQ_KEY"] for message in store.iter_messages()
                       if message.topic == "Orders")


def test_a_writer_killed_mid_delivery_delivers_each_timer_message_once(tmp_path: Path) -> None:
    first = _child(tmp_path, COUNT)
    assert first.stdout is not None
    deadline = time.monotonic() + 60
    delivered = 0
    for line in first.stdout:
        delivered = json.loads(line)["delivered"]
        if delivered >= KILL_AFTER:
            break
        assert time.monotonic() < deadline, "the child never delivered half"
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert 0 < delivered < COUNT, delivered
    killed_with = _delivered_copies(tmp_path)
    assert all(copies == 1 for copies in killed_with.values())
    second = _child(tmp_path, 0)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    done = json.loads(out.strip().splitlines()[-1])
    copies = _delivered_copies(tmp_path)
    assert sorted(copies) == [f"U{index:05d}" for index in range(COUNT)]
    assert max(copies.values()) == 1, [key for key, n in copies.items() if n > 1][:10]
    assert done["done"] == COUNT - len(killed_with)  # delivered by the second run
    assert done["skipped"] > 0, "the restart found no copy delivered after the checkpoint"
