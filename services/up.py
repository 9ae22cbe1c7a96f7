"""`mqstore up`: the three services as separate processes on one local directory.

    writer   (mqstore writer   --config F)   appends; publishes `positions`
    indexer  (mqstore indexer  --config F)   dispatches up to them; streams notices
    notifier (mqstore notifier --config F)   serves consumers from the notices

The same processes the containers of a Broker pod run, with the same config file (given with
`--config`, or a minimal one naming `--data`); ports come in as `MQSTORE_<SERVICE>__PORT`
overrides.  The notifier also serves the RocketMQ remoting protocol (`ports["remoting"]`,
9876: name server and broker on one port), forwarding sends to the writer's forward port
(`ports["forward"]`, 8085); the records' STOREHOST, which routes name, is set to the
remoting address.  Every listener binds `--host` (127.0.0.1 by default).  Without `--config`,
`up` keeps a replication secret in the data directory (`replication-secret`, made once,
mode 0600) and points the writer at it: a follower elsewhere proves it holds a copy of that
file before the writer streams it a byte.  `up` supervises them: it waits until each answers
/readyz, prints the URLs, and restarts one that dies (after `restart_backoff_ms`, doubling to
`restart_backoff_max_ms`), because every service recovers from its files on start.  Ctrl-C
or SIGTERM stops them in the order that loses nothing: notifier (no more reads), writer
(drains, flushes), then the indexer (dispatches up to the writer's final positions).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from mqstore.services.common.config_file import ENV_DATA_DIR, NotifierSettings, load_config
from mqstore.services.common.tls_settings import client_context

SERVICES = ("writer", "indexer", "notifier")
UP_PORTS = {"writer": 8081, "indexer": 8082, "notifier": 8083, "remoting": 9876, "forward": 8085}
"""Default ports: the three services' HTTP, the notifier's RocketMQ remoting front (RocketMQ's
name-server port) and the writer's listener for the sends the front forwards."""
REPLICATION_SECRET_FILE = "replication-secret"
"""Made by `up` in the data directory when no config file names a secret."""
REPLICATION_SECRET_SIZE_BYTES = 32
STOP_ORDER = ("notifier", "writer", "indexer")
START_ORDER = ("indexer", "writer", "notifier")


@dataclasses.dataclass
class UpOptions:
    data_dir: Path
    ports: dict[str, int]
    host: str = "127.0.0.1"
    config: Path | None = None
    ready_timeout_s: float = 60.0
    stop_timeout_s: float = 60.0
    restart_backoff_ms: int = 500
    restart_backoff_max_ms: int = 10_000


@dataclasses.dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    started_s: float
    backoff_ms: int


class Supervisor:
    def __init__(self, options: UpOptions, *, say: Callable[[str], None]) -> None:
        self.options = options
        self._say = say
        self._children: dict[str, Child] = {}
        self._config_path = options.config or _minimal_config(options.data_dir)
        self._owns_config = options.config is None
        self._stopping = False
        # With a `tls` section every listener speaks only TLS: URLs and readiness follow.
        tls = load_config(self._config_path,
                          environ={**os.environ, ENV_DATA_DIR: str(options.data_dir)}).tls
        self._scheme = "https" if tls.enabled else "http"
        self._ready_ssl = client_context(tls, host="127.0.0.1")

    def url(self, name: str) -> str:
        return f"{self._scheme}://{self.options.host}:{self.options.ports[name]}"

    def _environment(self) -> dict[str, str]:
        environment = dict(os.environ)
        environment["MQSTORE_DATA_DIR"] = str(self.options.data_dir)
        for name in SERVICES:
            environment[f"MQSTORE_{name.upper()}__HOST"] = self.options.host
            environment[f"MQSTORE_{name.upper()}__PORT"] = str(self.options.ports[name])
        # The writer's replication listener (any free port) binds where the services do.
        environment["MQSTORE_REPLICATION__HOST"] = self.options.host
        if self._owns_config and "MQSTORE_REPLICATION__SECRET_FILE" not in environment:
            environment["MQSTORE_REPLICATION__SECRET_FILE"] = str(
                replication_secret(self.options.data_dir))
        if "remoting" in self.options.ports:
            reachable = "127.0.0.1" if self.options.host in ("0.0.0.0", "") else \
                self.options.host
            environment["MQSTORE_REMOTING__HOST"] = self.options.host
            environment["MQSTORE_REMOTING__PORT"] = str(self.options.ports["remoting"])
            environment["MQSTORE_STORE__STORE_HOST"] = \
                f"{reachable}:{self.options.ports['remoting']}"
            environment["MQSTORE_WRITER__FORWARD_PORT"] = str(self.options.ports["forward"])
            # The writer's forward listener is on loopback (writer.forward_host), whatever --host.
            environment["MQSTORE_REMOTING__WRITER_ADDRESS"] = \
                f"127.0.0.1:{self.options.ports['forward']}"
        if "indexer_url" in {field.name for field in dataclasses.fields(NotifierSettings)}:
            environment["MQSTORE_NOTIFIER__INDEXER_URL"] = self.url("indexer")
        return environment

    def _spawn(self, name: str, backoff_ms: int) -> Child:
        command = [sys.executable, "-P", "-m", "mqstore.services.cli", name,
                   "--config", str(self._config_path)]
        # A session of its own: the terminal's Ctrl-C reaches `up` only, which then stops
        # the services in an order that loses nothing.
        process = subprocess.Popen(command, env=self._environment(), stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        child = Child(name, process, time.monotonic(), backoff_ms)
        self._children[name] = child
        return child

    def start(self) -> None:
        for name in START_ORDER:
            self._spawn(name, self.options.restart_backoff_ms)
            self._wait_ready(name)
            self._say(f"{name:<8} {self.url(name)}")
            if name == "notifier" and "remoting" in self.options.ports:
                self._say(f"remoting {self.options.host}:{self.options.ports['remoting']} "
                          f"(RocketMQ name server and broker: setNamesrvAddr)")

    def _wait_ready(self, name: str) -> None:
        deadline = time.monotonic() + self.options.ready_timeout_s
        child = self._children[name]
        while time.monotonic() < deadline:
            if child.process.poll() is not None:
                raise RuntimeError(f"{name} exited with status {child.process.returncode} "
                                   f"while starting (its log is above)")
            if _ready(self.url(name), self._ready_ssl):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{name} did not become ready within "
                           f"{self.options.ready_timeout_s:.0f} s at {self.url(name)}")

    def watch_once(self) -> None:
        """Restart any child that exited (unless stopping)."""
        for name, child in list(self._children.items()):
            code = child.process.poll()
            if code is None or self._stopping:
                continue
            ran_s = time.monotonic() - child.started_s
            backoff_ms = (self.options.restart_backoff_ms if ran_s > 60
                          else min(child.backoff_ms * 2, self.options.restart_backoff_max_ms))
            self._say(f"{name} exited with status {code}; restarting in {backoff_ms} ms")
            time.sleep(backoff_ms / 1000)
            self._spawn(name, backoff_ms)

    def stop(self) -> dict[str, int | None]:
        """SIGTERM each child in STOP_ORDER and wait for it; returns the exit codes."""
        self._stopping = True
        codes: dict[str, int | None] = {}
        for name in STOP_ORDER:
            child = self._children.get(name)
            if child is None:
                continue
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
            try:
                codes[name] = child.process.wait(self.options.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self._say(f"{name} did not stop within {self.options.stop_timeout_s:.0f} s; "
                          f"killing it (its next start recovers)")
                child.process.kill()
                codes[name] = child.process.wait()
        if self._owns_config:
            self._config_path.unlink(missing_ok=True)
        return codes


def replication_secret(data_dir: Path) -> Path:
    """`data_dir`'s replication secret file, made on first use (random, owner-only)."""
    path = data_dir / REPLICATION_SECRET_FILE
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_hex(REPLICATION_SECRET_SIZE_BYTES) + "\n")
    return path


def _ready(url: str, context: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=1, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _minimal_config(data_dir: Path) -> Path:
    handle, name = tempfile.mkstemp(prefix="mqstore-up-", suffix=".yaml")
    with os.fdopen(handle, "w") as file:
        file.write(f"# written by `mqstore up`; removed when it stops\ndata_dir: {data_dir}\n")
    return Path(name)


def run_up(options: UpOptions, *, say: Callable[[str], None]) -> int:
    options.data_dir.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(options, say=say)
    stop_requested: list[int] = []

    def request_stop(signum: int, frame: object) -> None:
        stop_requested.append(signum)

    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        supervisor.start()
        say("mqstore is up; Ctrl-C stops it")
        while not stop_requested:
            supervisor.watch_once()
            time.sleep(0.2)
        say("stopping: notifier, writer, indexer")
    except RuntimeError as error:
        say(str(error))
        supervisor.stop()
        return 1
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    codes = supervisor.stop()
    unclean = {name: code for name, code in codes.items() if code != 0}
    if unclean:
        say(f"stopped; not clean: {unclean}")
        return 1
    say("stopped cleanly")
    return 0
