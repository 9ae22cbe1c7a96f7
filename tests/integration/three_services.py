"""Run the three services as real processes on loopback, each killable and restartable."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from tests.processes import MQSTORE

SERVICES = ("writer", "indexer", "notifier")
SMALL_STORE = {"segment_size_bytes": 1 << 20, "message_body_size_bytes_max": 64 * 1024,
               "put_batch_size_bytes_max": 512 * 1024, "consume_queue_file_size_bytes": 20_000,
               "index_hash_slot_count": 1024, "index_count_max": 4096}


def free_ports(names: Iterable[str]) -> dict[str, int]:
    """A free port of 127.0.0.1 for each name, all different: every probe stays bound until
    the last is chosen (a probe closed before the next is bound may be handed the same
    port again, and two listeners of one test then collide)."""
    with contextlib.ExitStack() as stack:
        probes = {}
        for name in names:
            probe = stack.enter_context(socket.socket())
            probe.bind(("127.0.0.1", 0))
            probes[name] = probe
        return {name: int(probe.getsockname()[1]) for name, probe in probes.items()}


class ThreeServices:
    def __init__(self, tmp_path: Path, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.ports = free_ports(SERVICES)
        self.config = tmp_path / "mqstore.yaml"
        self.config.write_text(json.dumps({"data_dir": str(data_dir), "store": SMALL_STORE}))
        self.logs = tmp_path / "logs"
        self.logs.mkdir()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.starts = 0

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def start(self, name: str) -> None:
        environment = dict(os.environ)
        for service in SERVICES:
            environment[f"MQSTORE_{service.upper()}__HOST"] = "127.0.0.1"
            environment[f"MQSTORE_{service.upper()}__PORT"] = str(self.ports[service])
        environment["MQSTORE_NOTIFIER__INDEXER_URL"] = self.url("indexer")
        self.starts += 1
        log = open(self.logs / f"{name}-{self.starts}.log", "wb")  # noqa: SIM115 (kept open)
        self.processes[name] = subprocess.Popen(
            [*MQSTORE, name, "--config", str(self.config)],
            env=environment, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.wait_ready(name)

    def wait_ready(self, name: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            process = self.processes[name]
            assert process.poll() is None, f"{name} exited: {self.log_tail(name)}"
            try:
                with urllib.request.urlopen(f"{self.url(name)}/readyz", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise AssertionError(f"{name} not ready in {timeout_s} s: {self.log_tail(name)}")

    def kill(self, name: str) -> None:
        process = self.processes[name]
        process.send_signal(signal.SIGKILL)
        assert process.wait(30) == -signal.SIGKILL

    def stop_all(self) -> dict[str, int]:
        codes = {}
        for name in ("notifier", "writer", "indexer"):
            process = self.processes.get(name)
            if process is None:
                continue
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            codes[name] = process.wait(60)
        return codes

    def log_tail(self, name: str) -> str:
        logs = sorted(self.logs.glob(f"{name}-*.log"), key=lambda p: p.stat().st_mtime)
        return logs[-1].read_text()[-3000:] if logs else "(no log)"
