"""`mqstore up` never leaves its services behind, whatever ends it, and says "up" only when
its own services answer (services/cli/up.py).

Each test starts a real `up` (three services on a small store and free ports), ends it one
way, then waits until no child is alive (bounded, generous: the machine is shared) and checks
every port can be bound again.  A child that outlives `up` fails the wait.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.integration.three_services import SMALL_STORE, free_ports
from tests.processes import MQSTORE
from tests.remoting_clients.rocketmq_peer import port_free

UP_READY_LINE = b"mqstore is up"
START_TIMEOUT_S = 120.0
GONE_TIMEOUT_S = 90.0
"""A child stops on SIGTERM within its shutdown timeout; this bound only ends a failing run."""


class Up:
    """A running `mqstore up` in a session (and process group) of its own."""

    def __init__(self, tmp_path: Path, *, ports: dict[str, int] | None = None) -> None:
        self.ports = ports or free_ports(("writer", "indexer", "notifier", "remoting",
                                          "forward"))
        environment = {**os.environ, **{f"MQSTORE_STORE__{key.upper()}": str(value)
                                        for key, value in SMALL_STORE.items()}}
        environment.pop("MQSTORE_REMOTING__PORT", None)  # `up` names every port itself
        environment.pop("MQSTORE_WRITER__FORWARD_PORT", None)
        self.data_dir = tmp_path / "data"
        # The services' logs go to a file: a pipe nobody reads could fill and block them.
        self.stderr_path = tmp_path / "up.stderr"
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [*MQSTORE, "up", "--data", str(self.data_dir),
                 *(item for name, port in self.ports.items()
                   for item in (f"--{name}-port", str(port)))],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                env=environment, start_new_session=True)
        assert self.process.stdout is not None
        self.stdout: IO[bytes] = self.process.stdout
        self.children: list[int] = []

    def wait_up(self) -> None:
        """Read stdout until the "up" line; note the children's pids."""
        seen = b""
        while UP_READY_LINE not in seen:
            line = self.stdout.readline()
            assert line, f"up ended before it was up: {seen!r} {self._stderr_tail()}"
            seen += line
        self.children = _children_of(self.process.pid)
        assert len(self.children) == 3, self.children

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def _stderr_tail(self) -> str:
        self.process.kill()
        self.process.wait()
        return self.stderr_text()[-2000:]

    def assert_nothing_left(self) -> None:
        deadline = time.monotonic() + GONE_TIMEOUT_S
        while any(_alive(pid) for pid in self.children) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [pid for pid in self.children if _alive(pid)]
        for pid in survivors:  # leave nothing behind for the next test, then fail
            os.kill(pid, signal.SIGKILL)
        assert survivors == [], f"children of up still alive: {survivors}"
        held = [name for name, port in self.ports.items() if not port_free(port)]
        assert held == [], f"ports still held after up ended: {held}"
        assert self._temporary_files() == []

    def _temporary_files(self) -> list[Path]:
        """Files `up` left in the temporary directory naming this run's data directory."""
        return [path for path in Path(tempfile.gettempdir()).glob("mqstore-up-*")
                if str(self.data_dir) in path.read_text(errors="replace")]


def _children_of(parent_pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent_pid:
                children.append(int(entry))
    return children


def _alive(pid: int) -> bool:
    """Running (not yet reaped and not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    running = Up(tmp_path)
    try:
        running.wait_up()
        yield running
    finally:
        if running.process.poll() is None:
            running.process.kill()
        running.process.wait()
        for pid in running.children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_sigint_with_stdout_a_closed_pipe_stops_the_services(up: Up) -> None:
    """`mqstore up | tee log`, then Ctrl-C: tee is gone, the "stopping" line meets a broken
    pipe, and the stop must still happen."""
    up.stdout.close()
    up.process.send_signal(signal.SIGINT)
    assert up.process.wait(GONE_TIMEOUT_S) == 0
    up.assert_nothing_left()
    assert "Traceback" not in up.stderr_text()


def test_hangup_stops_the_services(up: Up) -> None:
    """A closed terminal or a dropped SSH session: SIGHUP stops `up` as Ctrl-C does."""
    up.process.send_signal(signal.SIGHUP)
    assert up.process.wait(GONE_TIMEOUT_S) == 0
    up.assert_nothing_left()


def test_sigterm_then_sigkill_of_the_group_ends_the_services(up: Up) -> None:
    """A harness's stop: SIGTERM to the process group, SIGKILL before `up` finished
    stopping its services (the services are in sessions of their own: neither reaches them)."""
    os.killpg(up.process.pid, signal.SIGTERM)
    os.killpg(up.process.pid, signal.SIGKILL)
    up.process.wait()
    up.assert_nothing_left()


def test_sigkill_of_up_ends_the_services(up: Up) -> None:
    up.process.kill()
    up.process.wait()
    up.assert_nothing_left()


def test_sigkill_of_the_process_group_ends_the_services(up: Up) -> None:
    os.killpg(up.process.pid, signal.SIGKILL)
    up.process.wait()
    up.assert_nothing_left()


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        ports = free_ports(("writer", "indexer", "notifier", "remoting", "forward"))
        ports["writer"] = holder.getsockname()[1]
        running = Up(tmp_path, ports=ports)
        try:
            out, _ = running.process.communicate(timeout=START_TIMEOUT_S)
        finally:
            if running.process.poll() is None:
                running.process.kill()
                running.process.wait()
    err = running.stderr_text()
    assert running.process.returncode == 2, err
    assert b"is up" not in out
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"port {ports['writer']} on 127.0.0.1 (writer) is in use" in lines[0]


class _OtherService(http.server.BaseHTTPRequestHandler):
    """Another process's service on the port: ready, with a pid that is not up's child."""

    def do_GET(self) -> None:
        body = json.dumps({"status": "ready", "pid": 1}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_ready_only_when_its_own_child_answers(tmp_path: Path) -> None:
    """The port answered /readyz, but not from the child `up` started: that is a port in use
    (exit 2), never "up" (a user's sends would go to another store)."""
    from mqstore.services.cli.up import Child, Supervisor, UpError, UpOptions  # noqa: PLC0415
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtherService)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ports = {"writer": server.server_address[1], **free_ports(("indexer", "notifier"))}
    supervisor = Supervisor(UpOptions(data_dir=tmp_path, ports=ports, ready_timeout_s=60.0),
                            say=lambda line: None, stop_requested=lambda: False)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        supervisor._children["writer"] = Child("writer", sleeper, time.monotonic(), 500)
        with pytest.raises(UpError) as raised:
            supervisor.wait_ready("writer")
        assert raised.value.exit_code == 2
        assert "answered by another process, pid 1" in str(raised.value)
    finally:
        sleeper.kill()
        sleeper.wait()
        server.shutdown()
        server.server_close()
