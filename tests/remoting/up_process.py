"""`mqstore up` as a child process on loopback ports the OS picked, for end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.integration.three_services import free_ports
from tests.processes import MQSTORE

UP_READY_LINE = "mqstore is up"


@contextlib.contextmanager
def mqstore_up(tmp_path: Path, *, ready_timeout_s: float = 120.0,
               settings: dict[str, str] | None = None) -> Iterator[dict[str, int]]:
    """Yield the ports of a running `mqstore up`; stop it with SIGINT after.  `settings` are
    extra `MQSTORE_SECTION__KEY` variables for its services (e.g. the users file)."""
    ports = free_ports(("writer", "indexer", "notifier", "remoting",
                                              "forward"))
    log_path = tmp_path / "up.log"
    command = [*MQSTORE, "up", "--data", str(tmp_path / "data"),
               *(item for name, port in ports.items()
                 for item in (f"--{name}-port", str(port)))]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL,
                                   env={**os.environ, **(settings or {})})
    try:
        deadline = time.monotonic() + ready_timeout_s
        while UP_READY_LINE not in log_path.read_text():
            assert process.poll() is None, f"mqstore up exited: {log_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"not up: {log_path.read_text()[-3000:]}"
            time.sleep(0.1)
        yield ports
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
