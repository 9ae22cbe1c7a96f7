"""`mqstore up`: the three services as separate processes on one local directory.

    writer   (mqstore writer   [--config F])   appends; publishes `positions`
    indexer  (mqstore indexer  [--config F])   dispatches up to them; streams notices
    notifier (mqstore notifier [--config F])   serves consumers from the notices

The same processes the containers of a Broker pod run, with the same config file (given with
`--config`; without it, settings from `--data` and the environment alone); ports come in as
`MQSTORE_<SERVICE>__PORT` overrides. The notifier also serves the RocketMQ remoting protocol
(`ports["remoting"]`, 9876: name server and broker on one port), forwarding sends to the
writer's forward port (`ports["forward"]`, 8085); the records' STOREHOST, which routes name,
is set to the remoting address. Every listener binds `--host` (127.0.0.1 by default). Without
`--config`, `up` keeps a replication secret in the data directory (`replication-secret`, made
once, mode 0600) and points the writer at it: a follower elsewhere proves it holds a copy of
that file before the writer streams it a byte. `up` supervises them: it waits until each
answers /readyz, prints the URLs, and restarts one that dies (after `restart_backoff_ms`,
doubling to `restart_backoff_max_ms`), because every service recovers from its files on start.
Ctrl-C, SIGTERM or SIGHUP (a closed terminal) stops them in the order that loses nothing:
notifier (no more reads), writer (drains, flushes), then the indexer (dispatches up to the
writer's final positions).

No service outlives `up`, whatever ends it:

| `up` is ended by                          | its services                                  |
|-------------------------------------------|-----------------------------------------------|
| Ctrl-C, SIGTERM, SIGHUP                   | stopped by `up` in the order above            |
| the same with stdout a closed pipe        | the same: a line `up` cannot print is dropped |
| (`up | tee log`, the reader gone)         | and never skips the stop                      |
| SIGKILL, of `up` or of its process group  | SIGTERM from the kernel (parent_death.py)     |
| a failed start                            | stopped before `up` exits                     |

`up --groups N` runs a name server and N such groups instead (up_groups.py).

"up" is said only when `up`'s own processes answer: every /readyz answer carries the pid of
the process that gave it, and a port answered by another pid is reported as in use.  Before
starting anything `up` tries each port: one in use is one line and exit 2.  `up` writes no
temporary file: without `--config` the services read their settings from the environment.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from mqstore.services.cli.options import discard_stdout
from mqstore.services.common.process.parent_death import ENV_PARENT_PID
from mqstore.services.common.settings.config_file import ENV_DATA_DIR, NotifierSettings, load_config
from mqstore.services.common.settings.tls import client_context

SERVICES = ("writer", "indexer", "notifier")
REPLICATION_SECRET_FILE = "replication-secret"
"""Made by `up` in the data directory when no config file names a secret."""
REPLICATION_SECRET_SIZE_BYTES = 32
STOP_ORDER = ("notifier", "writer", "indexer")
START_ORDER = ("indexer", "writer", "notifier")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_FAILED = 1
EXIT_USAGE = 2


class UpError(Exception):
    """`up` cannot start: the message is one line for the user, `exit_code` what `up` returns
    (2 for what the user can fix: a port in use, 1 for a service that failed)."""

    def __init__(self, message: str, *, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclasses.dataclass(frozen=True)
class BrokerRegistration:
    """A group of `up --groups`: the broker its notifier registers as, and where."""

    cluster_name: str
    broker_name: str
    namesrv_address: str
    """"host:port" of the name server `up` runs."""


@dataclasses.dataclass
class UpOptions:
    data_dir: Path
    ports: dict[str, int]
    host: str = "127.0.0.1"
    config: Path | None = None
    broker: BrokerRegistration | None = None
    """None: one group that registers nowhere (its front answers name-server codes itself)."""
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
    child_stdout: int | None = None
    """Where the children's stdout goes (None: `up`'s; the services log to stderr)."""

    def __init__(self, options: UpOptions, *, say: Callable[[str], None],
                 stop_requested: Callable[[], bool] = lambda: False) -> None:
        """`stop_requested`: polled while starting and restarting, so a stop signal never
        waits for a whole start or backoff."""
        self.options = options
        self._say = say
        self._stop_requested = stop_requested
        self._children: dict[str, Child] = {}
        self._owns_config = options.config is None
        self._stopping = False
        # With a `tls` section every listener speaks only TLS: URLs and readiness follow.
        tls = load_config(options.config,
                          environ={**os.environ, ENV_DATA_DIR: str(options.data_dir)}).tls
        self._scheme = "https" if tls.enabled else "http"
        self._ready_ssl = client_context(tls, host="127.0.0.1")

    def url(self, name: str) -> str:
        return f"{self._scheme}://{self.options.host}:{self.options.ports[name]}"

    def _environment(self) -> dict[str, str]:
        environment = dict(os.environ)
        environment[ENV_DATA_DIR] = str(self.options.data_dir)
        environment[ENV_PARENT_PID] = str(os.getpid())
        for name in SERVICES:
            environment[f"MQSTORE_{name.upper()}__HOST"] = self.options.host
            environment[f"MQSTORE_{name.upper()}__PORT"] = str(self.options.ports[name])
        # The writer's replication listener (any free port) binds where the services do.
        environment["MQSTORE_REPLICATION__HOST"] = self.options.host
        if self._owns_config and "MQSTORE_REPLICATION__SECRET_FILE" not in environment:
            environment["MQSTORE_REPLICATION__SECRET_FILE"] = str(
                replication_secret(self.options.data_dir))
        if "remoting" in self.options.ports:
            reachable = reachable_host(self.options.host)
            environment["MQSTORE_REMOTING__HOST"] = self.options.host
            environment["MQSTORE_REMOTING__PORT"] = str(self.options.ports["remoting"])
            environment["MQSTORE_STORE__STORE_HOST"] = \
                f"{reachable}:{self.options.ports['remoting']}"
            environment["MQSTORE_WRITER__FORWARD_PORT"] = str(self.options.ports["forward"])
            # The writer's forward listener is on loopback (writer.forward_host), whatever --host.
            environment["MQSTORE_REMOTING__WRITER_ADDRESS"] = \
                f"127.0.0.1:{self.options.ports['forward']}"
        if self.options.broker is not None:
            environment["MQSTORE_REMOTING__CLUSTER_NAME"] = self.options.broker.cluster_name
            environment["MQSTORE_REMOTING__BROKER_NAME"] = self.options.broker.broker_name
            environment["MQSTORE_REMOTING__NAMESRV_ADDRESSES"] = \
                self.options.broker.namesrv_address
        if "indexer_url" in {field.name for field in dataclasses.fields(NotifierSettings)}:
            environment["MQSTORE_NOTIFIER__INDEXER_URL"] = self.url("indexer")
        return environment

    def _command(self, name: str) -> list[str]:
        command = [sys.executable, "-P", "-m", "mqstore.services.cli", name]
        if self.options.config is not None:
            command += ["--config", str(self.options.config)]
        return command

    def spawn(self, name: str, backoff_ms: int | None = None) -> Child:
        """Start `name`, not waiting for it; `backoff_ms`: the wait before this start (a
        restart), doubled if it dies again soon."""
        # A session of its own: the terminal's Ctrl-C reaches `up` only, which then stops
        # the services in an order that loses nothing.
        process = subprocess.Popen(self._command(name), env=self._environment(),
                                   stdin=subprocess.DEVNULL, stdout=self.child_stdout,
                                   start_new_session=True)
        if backoff_ms is None:
            backoff_ms = self.options.restart_backoff_ms
        child = Child(name, process, time.monotonic(), backoff_ms)
        self._children[name] = child
        return child

    def start(self) -> None:
        """Start the services one by one, each once the previous is ready; returns early when
        a stop is requested meanwhile."""
        for name in START_ORDER:
            if self._stop_requested():
                return
            self.spawn(name)
            self.wait_ready(name)
            if self._stop_requested():
                return
            self.announce(name)

    def announce(self, name: str) -> None:
        """Say where `name` answers, once it is ready."""
        self._say(f"{name:<8} {self.url(name)}")
        if name != "notifier" or "remoting" not in self.options.ports:
            return
        address = f"{self.options.host}:{self.options.ports['remoting']}"
        broker = self.options.broker
        self._say(f"remoting {address} (RocketMQ name server and broker: setNamesrvAddr)"
                  if broker is None else f"remoting {address} (broker {broker.broker_name} "
                  f"of {broker.cluster_name}, registered with {broker.namesrv_address})")

    def wait_ready(self, name: str) -> None:
        """Until `name`'s own process answers /readyz: another process answering on its port
        (another mqstore) is a port in use, not a ready service."""
        deadline = time.monotonic() + self.options.ready_timeout_s
        child = self._children[name]
        while time.monotonic() < deadline and not self._stop_requested():
            code = child.process.poll()
            if code is not None:
                raise UpError(f"{name} exited with status {code} while starting (its log is "
                              f"above)", exit_code=EXIT_USAGE if code == EXIT_USAGE
                              else EXIT_FAILED)
            pid = _ready_pid(self.url(name), self._ready_ssl)
            if pid is not None and pid != child.process.pid:
                raise UpError(_in_use(name, self.options.host, self.options.ports[name],
                                      f"answered by another process, pid {pid}"),
                              exit_code=EXIT_USAGE)
            if pid is not None:
                return
            time.sleep(0.05)
        if self._stop_requested():
            return
        raise UpError(f"{name} did not become ready within {self.options.ready_timeout_s:.0f} "
                      f"s at {self.url(name)}", exit_code=EXIT_FAILED)

    def watch_once(self) -> None:
        """Restart any child that exited (unless stopping)."""
        for name, child in list(self._children.items()):
            code = child.process.poll()
            if code is None or self._stopping or self._stop_requested():
                continue
            ran_s = time.monotonic() - child.started_s
            backoff_ms = (self.options.restart_backoff_ms if ran_s > 60
                          else min(child.backoff_ms * 2, self.options.restart_backoff_max_ms))
            self._say(f"{name} exited with status {code}; restarting in {backoff_ms} ms")
            restart_at = time.monotonic() + backoff_ms / 1000
            while time.monotonic() < restart_at and not self._stop_requested():
                time.sleep(0.05)  # a stop during the backoff is not kept waiting
            if not self._stop_requested():
                self.spawn(name, backoff_ms)

    def stop(self) -> dict[str, int | None]:
        """SIGTERM each child in STOP_ORDER and wait for it; returns the exit codes."""
        codes: dict[str, int | None] = {}
        for name in STOP_ORDER:
            if self.terminate(name):
                codes[name] = self.wait_stopped(name)
        return codes

    def terminate(self, name: str) -> bool:
        """SIGTERM `name` and restart nothing from now on; False if it was never started."""
        self._stopping = True
        child = self._children.get(name)
        if child is None:
            return False
        if child.process.poll() is None:
            child.process.send_signal(signal.SIGTERM)
        return True

    def wait_stopped(self, name: str) -> int | None:
        """`name`'s exit code, once it ends (killed after `stop_timeout_s`)."""
        child = self._children[name]
        try:
            return child.process.wait(self.options.stop_timeout_s)
        except subprocess.TimeoutExpired:
            self._say(f"{name} did not stop within {self.options.stop_timeout_s:.0f} s; "
                      f"killing it (its next start recovers)")
            child.process.kill()
            return child.process.wait()


def reachable_host(host: str) -> str:
    """Where a local client reaches a listener bound to `host` (any address: loopback)."""
    return "127.0.0.1" if host in ("0.0.0.0", "") else host


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


def _ready_pid(url: str, context: ssl.SSLContext | None) -> int | None:
    """The pid in `url`'s 200 /readyz answer; None while it is not ready (or not a service
    of this version: no pid)."""
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=1, context=context) as response:
            answer = json.loads(response.read()) if response.status == 200 else {}
    except (urllib.error.URLError, OSError, ValueError):
        return None
    pid = answer.get("pid") if isinstance(answer, dict) else None
    return pid if isinstance(pid, int) else None


def _in_use(name: str, host: str, port: int, detail: str) -> str:
    return (f"port {port} on {host} ({name}) is in use ({detail}); stop what holds it or "
            f"choose another with --{name}-port")


def check_ports_free(host: str, ports: dict[str, int]) -> None:
    """UpError (exit 2) naming the first of `ports` another process listens on.  Bound as
    the services bind (SO_REUSEADDR), so a port in TIME_WAIT after the last run passes."""
    for name, port in ports.items():
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as error:
                raise UpError(_in_use(name, host, port, error.strerror or str(error)),
                              exit_code=EXIT_USAGE) from None


class Supervised(Protocol):
    """What `supervise` runs: one group's Supervisor, or a name server and groups."""

    def start(self) -> None: ...
    def watch_once(self) -> None: ...
    def stop(self) -> dict[str, int | None]: ...


def run_up(options: UpOptions, *, say: Callable[[str], None]) -> int:
    """Run the services until a stop signal; UpError before any started (a port in use).
    Whatever happens after the first start, the services are stopped before this returns."""
    options.data_dir.mkdir(parents=True, exist_ok=True)
    check_ports_free(options.host, options.ports)
    return supervise(lambda say, stop_requested: Supervisor(
        options, say=say, stop_requested=stop_requested), say=say,
        stop_order=", ".join(STOP_ORDER))


def supervise(build: Callable[[Callable[[str], None], Callable[[], bool]], Supervised], *,
              say: Callable[[str], None], stop_order: str) -> int:
    """Start what `build(say, stop_requested)` makes, watch it until a stop signal, stop it
    (also on a failed start) and return `up`'s exit status."""
    say = _never_raising(say)
    stop_requested: list[int] = []

    def request_stop(signum: int, frame: object) -> None:
        stop_requested.append(signum)

    supervisor = build(say, lambda: bool(stop_requested))
    previous = {s: signal.signal(s, request_stop) for s in STOP_SIGNALS}
    failed: UpError | None = None
    try:
        supervisor.start()
        if not stop_requested:
            say("mqstore is up; Ctrl-C stops it")
        while not stop_requested:
            supervisor.watch_once()
            time.sleep(0.2)
        say(f"stopping: {stop_order}")
    except UpError as error:
        failed = error
    finally:
        codes = supervisor.stop()  # also on an exception: the services never outlive `up`
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if failed is not None:
        say(str(failed))
        return failed.exit_code
    unclean = {name: code for name, code in codes.items() if code != 0}
    if unclean:
        say(f"stopped; not clean: {unclean}")
        return EXIT_FAILED
    say("stopped cleanly")
    return 0


def _never_raising(say: Callable[[str], None]) -> Callable[[str], None]:
    """`say` that drops a line it cannot write: with stdout a pipe whose reader is gone
    (`up | tee log` after Ctrl-C), a failed print must not skip the stop."""

    def tolerant(line: str) -> None:
        try:
            say(line)
        except OSError:
            discard_stdout()

    return tolerant

