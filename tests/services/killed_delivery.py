"""A child writer that delivers scheduled messages (delay levels, timers), killed -9 once it
has delivered some, then run again to the end: what tests/services/test_delay_kill9.py and
tests/services/test_timer_kill9.py check.  The child (`MODULE DIRECTORY COUNT`) produces
COUNT messages to `Orders` with UNIQ_KEYs U00000.., prints {"delivered": n} lines as it
delivers, and run with COUNT 0 delivers what is pending and prints its closing counts."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from mqstore.storage import MessageStore
from tests.processes import module_command
from tests.storage.dispatch.split_helpers import writer_config

REPO = Path(__file__).parents[2]
CHILD_TIMEOUT_S = 60


@dataclasses.dataclass
class KilledDelivery:
    killed_with: Counter[str]
    """Copies in the log when the first child was killed."""
    copies: Counter[str]
    """Copies in the log after the second child ended."""
    done: dict[str, Any]
    """The second child's closing counts."""

    def assert_each_delivered_once(self, count: int, *, recognised_key: str) -> None:
        """Every message U00000.. delivered exactly once over both runs; the second run
        delivered the rest and recognised (its count under `recognised_key`) at least one
        copy the first had delivered after its last saved progress."""
        assert all(copies == 1 for copies in self.killed_with.values())
        assert sorted(self.copies) == [f"U{index:05d}" for index in range(count)]
        assert max(self.copies.values()) == 1, \
            [key for key, n in self.copies.items() if n > 1][:10]
        assert self.done["done"] == count - len(self.killed_with)
        assert self.done[recognised_key] > 0, "the restart found no copy delivered after " \
                                              "the last saved progress"


def kill_mid_delivery(module: str, directory: Path, *, count: int,
                      kill_after: int) -> KilledDelivery:
    first = _child(module, directory, count)
    assert first.stdout is not None
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    delivered = 0
    for line in first.stdout:
        delivered = json.loads(line)["delivered"]
        if delivered >= kill_after:
            break
        assert time.monotonic() < deadline, "the child never delivered enough"
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert 0 < delivered < count, delivered
    killed_with = delivered_copies(directory)
    second = _child(module, directory, 0)
    out, err = second.communicate(timeout=CHILD_TIMEOUT_S)
    assert second.returncode == 0, err
    return KilledDelivery(killed_with, delivered_copies(directory),
                          json.loads(out.strip().splitlines()[-1]))


def delivered_copies(directory: Path) -> Counter[str]:
    with MessageStore.open(directory, writer_config()) as store:
        return Counter(message.properties["UNIQ_KEY"] for message in store.iter_messages()
                       if message.topic == "Orders")


def _child(module: str, directory: Path, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen([*module_command(module), str(directory), str(count)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
