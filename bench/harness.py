"""What the HTTP benchmarks share: processes to start and measure, run conditions, output.

* `MqstoreServices`: some of mqstore's three services (`mqstore writer|indexer|notifier
  --config FILE`) as separate processes on a fresh temporary directory and free loopback
  ports, started and stopped in `mqstore up`'s orders; their CPU time from /proc.
* `Conditions`: the load average at the start and the end of a run.  The machine is shared
  with other builds and tests, so every figure is printed with the load it was taken under.
* `percentiles`, `summary`, `write_results`: medians and spreads, and one JSON document per
  invocation in bench/results/ (git-ignored; or `$MQSTORE_BENCH_RESULTS_DIR`), named after
  the script and the start time.
* `install_uvloop`: the clients run on uvloop, as the services do by default.

The benchmark scripts import this file from their own folder (`python bench/<script>.py`
puts bench/ first on sys.path).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import math
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import uvloop

from mqstore.services.cli.up import START_ORDER, STOP_ORDER

RESULTS_DIR = Path(os.environ.get("MQSTORE_BENCH_RESULTS_DIR")
                   or Path(__file__).resolve().parent / "results")
"""bench/results/ (git-ignored); the smoke test points MQSTORE_BENCH_RESULTS_DIR elsewhere."""
BODY = bytes(range(32, 128)) * 10 + bytes(range(32, 96))  # 1024 printable bytes
assert len(BODY) == 1024
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0


def install_uvloop() -> None:
    """Every later `asyncio.run` uses uvloop, the services' default loop."""
    uvloop.install()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU time of this process, every thread included."""
    return time.process_time()


class MqstoreServices:
    """`names` of mqstore's services on a fresh directory, each its own process.

    `store` and `writer` are the config file's sections (StoreConfig fields, WriterSettings);
    every service listens on a free port of 127.0.0.1, logs at warning level to a file in the
    temporary directory (shown if it fails to start) and runs on `event_loop`.  `tls`: the
    config file's `tls` section (TlsSettings); the URLs are then https and `ssl_context`
    trusts its `ca_file`.  With `users_file_text` (a plain_acl.yml), the services run with
    that users file (`auth.users_file`), and every request needs credentials.
    """

    def __init__(self, names: Sequence[str] = START_ORDER, *, store: Mapping[str, Any],
                 writer: Mapping[str, Any] | None = None, event_loop: str = "uvloop",
                 tls: Mapping[str, str] | None = None,
                 users_file_text: str | None = None) -> None:
        assert set(names) <= set(START_ORDER), names
        self.names = [name for name in START_ORDER if name in names]
        self._store = dict(store)
        self._writer = dict(writer or {})
        self._event_loop = event_loop
        self._tls = dict(tls or {})
        self.ssl_context = ssl.create_default_context(cafile=self._tls["ca_file"]) \
            if self._tls else None
        self._users_file_text = users_file_text
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._ports: dict[str, int] = {}
        self._directory: Path | None = None

    def url(self, name: str) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://127.0.0.1:{self._ports[name]}"

    @property
    def remoting_address(self) -> str:
        """The notifier's RocketMQ remoting front (name server and broker)."""
        return f"127.0.0.1:{self._ports['remoting']}"

    @property
    def data_dir(self) -> Path:
        assert self._directory is not None, "not started"
        return self._directory / "data"

    def start(self) -> None:
        assert self._directory is None, "already started"
        self._directory = Path(tempfile.mkdtemp(prefix="mqstore-bench-"))
        self._ports = {name: free_port() for name in (*START_ORDER, "remoting", "forward")}
        common = {"host": "127.0.0.1", "log_level": "warning", "event_loop": self._event_loop}
        config = {"data_dir": str(self.data_dir), "store": self._store,
                  "writer": {**common, "port": self._ports["writer"], **self._writer},
                  "indexer": {**common, "port": self._ports["indexer"]},
                  "notifier": {**common, "port": self._ports["notifier"],
                               "indexer_url": self.url("indexer")},
                  "remoting": {"host": "127.0.0.1", "port": self._ports["remoting"],
                               "writer_address": f"127.0.0.1:{self._ports['forward']}"}}
        config["writer"].setdefault("forward_port", self._ports["forward"])
        if self._tls:
            config["tls"] = self._tls
        config["store"] = {"store_host": f"127.0.0.1:{self._ports['remoting']}",
                           **config["store"]}
        if self._users_file_text is not None:
            users_file = self._directory / "plain_acl.yml"
            users_file.write_text(self._users_file_text)
            config["auth"] = {"users_file": str(users_file)}
        path = self._directory / "mqstore.yaml"
        path.write_text(json.dumps(config))  # JSON is YAML
        try:
            for name in self.names:
                log = (self._directory / f"{name}.log").open("wb")
                self._processes[name] = subprocess.Popen(
                    [sys.executable, "-P", "-m", "mqstore.services.cli", name,
                     "--config", str(path)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log)
                log.close()
                self._wait_ready(name)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, name: str) -> None:
        assert self._directory is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._processes[name].poll() is not None:
                log = (self._directory / f"{name}.log").read_text()[-3000:]
                raise RuntimeError(f"mqstore {name} exited while starting:\n{log}")
            with contextlib.suppress(urllib.error.URLError, OSError), \
                    urllib.request.urlopen(f"{self.url(name)}/readyz", timeout=1,
                                           context=self.ssl_context) as answer:
                if answer.status == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"mqstore {name} not ready within {READY_TIMEOUT_S:.0f} s")

    def pids(self) -> dict[str, int]:
        return {name: process.pid for name, process in self._processes.items()}

    def cpu_seconds(self) -> dict[str, float]:
        """Per service, the CPU time its process has used so far."""
        return {name: process_cpu_seconds(pid) for name, pid in self.pids().items()}

    def stop(self) -> None:
        """SIGTERM in `mqstore up`'s order (notifier, writer, indexer); remove the directory."""
        for name in STOP_ORDER:
            process = self._processes.pop(name, None)
            if process is None:
                continue
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


@contextlib.contextmanager
def running(services: MqstoreServices) -> Iterator[MqstoreServices]:
    services.start()
    try:
        yield services
    finally:
        services.stop()


@dataclasses.dataclass
class Conditions:
    """When a run happened and how loaded the machine was at its start and end."""

    started: str
    load_average_start: tuple[float, float, float]
    load_average_end: tuple[float, float, float] | None = None
    cpu_count: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 0)

    @classmethod
    def now(cls) -> Conditions:
        return cls(datetime.datetime.now().isoformat(timespec="seconds"), os.getloadavg())

    def finish(self) -> None:
        self.load_average_end = os.getloadavg()

    def describe(self) -> str:
        def loads(values: tuple[float, float, float] | None) -> str:
            return "?" if values is None else " ".join(f"{value:.2f}" for value in values)

        return (f"started {self.started} on {self.cpu_count} CPUs; load average (1/5/15 min) "
                f"at start {loads(self.load_average_start)}, at end "
                f"{loads(self.load_average_end)}")


def percentiles(values: Sequence[float], points: Sequence[float] = (50, 99)) -> list[float]:
    """Nearest-rank percentiles of `values` (not interpolated: every figure was observed)."""
    assert values, "no values"
    ordered = sorted(values)
    return [ordered[min(len(ordered), max(1, math.ceil(p / 100 * len(ordered)))) - 1]
            for p in points]


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of one figure over runs."""
    assert values, "no runs"
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def write_results(script: str, conditions: Conditions, arguments: Mapping[str, Any],
                  rows: Sequence[Mapping[str, Any]]) -> Path:
    """bench/results/<script>-<start time>.json with the conditions, options and rows."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = conditions.started.replace("-", "").replace(":", "").replace("T", "-")
    path = RESULTS_DIR / f"{script}-{stamp}.json"
    path.write_text(json.dumps({"script": script, "conditions": dataclasses.asdict(conditions),
                                "arguments": dict(arguments), "rows": list(rows)}, indent=1))
    return path
