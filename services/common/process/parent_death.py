"""A child of `mqstore up` ends when `up` ends, however `up` ends.

`up` stops its services itself on Ctrl-C, SIGTERM and SIGHUP, but nothing runs in a process
killed with SIGKILL (an OOM kill, a harness killing its process group, `kill -9`): its
services, each in a session of its own, would live on holding the ports and the store locks,
and the next `up` would fail.  So each service asks the kernel for a signal when its parent
dies: Linux's `prctl(PR_SET_PDEATHSIG, SIGTERM)`, the same SIGTERM `up` sends, so the
service drains and flushes as on a normal stop.  `up` names itself in `MQSTORE_PARENT_PID`;
a child whose parent is already gone by the time it asks (the parent died between the fork
and the `prctl`) terminates at once.  Where `prctl` does not exist, a daemon thread checks
the parent every `PARENT_POLL_INTERVAL_MS` instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

ENV_PARENT_PID = "MQSTORE_PARENT_PID"
"""Set by `mqstore up` for its services: the pid whose death ends them."""
PR_SET_PDEATHSIG = 1
"""From <linux/prctl.h>."""
PARENT_POLL_INTERVAL_MS = 1000
"""Without prctl: how often the parent is checked.  A second of orphanhood is harmless; the
check is one system call."""


def follow_parent(parent_pid: int) -> None:
    """SIGTERM this process when `parent_pid` (its parent) exits."""
    assert parent_pid > 0
    if not _ask_kernel():
        threading.Thread(target=_watch, args=(parent_pid,), name="parent-watch",
                         daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def follow_parent_from_environment() -> None:
    """`follow_parent` for the pid in `MQSTORE_PARENT_PID`, if set (a service run by `up`)."""
    value = os.environ.get(ENV_PARENT_PID, "")
    if value.isdigit() and int(value) > 0:
        follow_parent(int(value))


def _ask_kernel() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    return int(libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)) == 0


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_INTERVAL_MS / 1000)
    os.kill(os.getpid(), signal.SIGTERM)
