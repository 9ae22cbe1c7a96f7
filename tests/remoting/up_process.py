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
SMALL_SEGMENTS = {"MQSTORE_STORE__SEGMENT_SIZE_BYTES": str(64 << 20)}
"""64 MiB segments: a fresh store's first put waits for its first segment to be created and
populated, about 3 s for the default 1 GiB here, which is the front's whole writer_timeout_ms
(the first send then answered SYSTEM_ERROR in some runs).  A Broker's pod prepares it in an
init container (`mqstore preallocate`); `mqstore up` does not yet."""


@contextlib.contextmanager
def mqstore_up(tmp_path: Path, *, ready_timeout_s: float = 120.0,
               settings: dict[str, str] | None = None,
               config: Path | None = None) -> Iterator[dict[str, int]]:
    """Yield the ports of a running `mqstore up`; stop it with SIGINT after.  `settings` are
    extra `MQSTORE_SECTION__KEY` variables for its services (e.g. the users file); `config`
    is its `--config` file (e.g. a `tls` section)."""
    ports = free_ports(("writer", "indexer", "notifier", "remoting",
                                              "forward"))
    log_path = tmp_path / "up.log"
    command = [*MQSTORE, "up", "--data", str(tmp_path / "data"),
               *(item for name, port in ports.items()
                 for item in (f"--{name}-port", str(port))),
               *(["--config", str(config)] if config is not None else [])]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL,
                                   env={**os.environ, **SMALL_SEGMENTS, **(settings or {})})
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
