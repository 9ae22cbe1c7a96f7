"""A master and its followers as processes: each node a writer (with `--role`), and on demand
its own indexer and notifier, on a directory of its own.  Optionally in a network namespace
(`netns_pid`): its commands then run under `nsenter -t PID -n`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from mqstore.services.cli.up import replication_secret
from tests.integration.three_services import SMALL_STORE, free_ports
from tests.processes import MQSTORE

FAST_REPLICATION = {"heartbeat_interval_ms": 200, "housekeeping_interval_ms": 1000,
                    "reconnect_interval_ms": 100, "connect_timeout_ms": 1000}


class Node:
    def __init__(self, root: Path, name: str, *, role: str, master: str | None = None,
                 host: str = "127.0.0.1", store: dict[str, Any] | None = None,
                 netns_pid: int | None = None) -> None:
        self.name = name
        self.role = role
        self.master = master
        self.host = host
        self.netns_pid = netns_pid
        self.data_dir = root / name / "data"
        self.logs = root / name / "logs"
        self.logs.mkdir(parents=True)
        # Several replicas share one host: the writer's forward listener and the notifier's
        # remoting front take free ports too, not their defaults (8085, 9876).
        ports = free_ports(("writer", "indexer", "notifier", "replication", "forward",
                            "remoting"))
        self.ports = {service: ports[service] for service in ("writer", "indexer", "notifier")}
        self.replication_port = ports["replication"]
        forward_port = ports["forward"]
        self.config = root / name / "mqstore.yaml"
        self.config.write_text(json.dumps({
            "data_dir": str(self.data_dir), "store": {**SMALL_STORE, **(store or {})},
            "replication": {"host": host, "port": self.replication_port,
                            "secret_file": str(replication_secret(root)), **FAST_REPLICATION},
            "writer": {"forward_port": forward_port},
            "notifier": {"indexer_url": f"http://{host}:{self.ports['indexer']}"},
            "remoting": {"port": ports["remoting"], "writer_address": f"127.0.0.1:{forward_port}"},
        }))
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.starts = 0

    @property
    def replication_address(self) -> str:
        return f"{self.host}:{self.replication_port}"

    def url(self, service: str = "writer") -> str:
        return f"http://{self.host}:{self.ports[service]}"

    def command(self, service: str) -> list[str]:
        command = [*MQSTORE, service, "--config", str(self.config)]
        if service == "writer":
            command += ["--role", self.role]
            if self.master is not None:
                command += ["--master", self.master]
        if self.netns_pid is not None:
            command = ["nsenter", "-t", str(self.netns_pid), "-n", *command]
        return command

    def start(self, service: str = "writer") -> None:
        environment = dict(os.environ)
        for overridden in ("MQSTORE_REMOTING__PORT", "MQSTORE_WRITER__FORWARD_PORT"):
            environment.pop(overridden, None)  # the config file names this replica's ports
        for name, port in self.ports.items():
            environment[f"MQSTORE_{name.upper()}__HOST"] = self.host
            environment[f"MQSTORE_{name.upper()}__PORT"] = str(port)
        self.starts += 1
        log = open(self.logs / f"{service}-{self.starts}.log", "wb")  # noqa: SIM115 (kept open)
        self.processes[service] = subprocess.Popen(
            self.command(service), env=environment, stdin=subprocess.DEVNULL, stdout=log,
            stderr=log)
        self.wait_ready(service)

    def wait_ready(self, service: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.processes[service].poll() is None, \
                f"{self.name} {service} exited: {self.log_tail(service)}"
            try:
                with urllib.request.urlopen(f"{self.url(service)}/readyz", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise AssertionError(f"{self.name} {service} not ready: {self.log_tail(service)}")

    def status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url()}/v1/replication", timeout=5) as answer:
            document = json.loads(answer.read())
        assert isinstance(document, dict)
        return document

    def kill(self, service: str = "writer") -> None:
        process = self.processes[service]
        process.send_signal(signal.SIGKILL)
        assert process.wait(30) == -signal.SIGKILL

    def stop(self) -> dict[str, int]:
        codes = {}
        for service in ("notifier", "writer", "indexer"):
            process = self.processes.get(service)
            if process is None:
                continue
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            codes[service] = process.wait(60)
        return codes

    def kill_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(30)

    def log_tail(self, service: str) -> str:
        logs = sorted(self.logs.glob(f"{service}-*.log"), key=lambda p: p.stat().st_mtime)
        return logs[-1].read_text()[-3000:] if logs else "(no log)"


def wait_for(condition: Any, *, timeout_s: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not reached in {timeout_s} s"
        time.sleep(0.05)


def segment_files(data_dir: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in (data_dir / "commitlog").iterdir()
            if len(path.name) == 20}


def assert_same_log(master: Path, follower: Path, *, end_position: int) -> int:
    """The follower's segments equal the master's, byte for byte, wherever the master wrote
    below `end_position`; returns how many were compared."""
    mine, theirs = segment_files(master), segment_files(follower)
    written = sorted(name for name in mine if int(name) < end_position)
    assert written, "the master wrote nothing"
    for name in written:
        assert name in theirs, f"segment {name} missing on the follower"
        assert mine[name] == theirs[name], f"segment {name} differs"
    return len(written)
