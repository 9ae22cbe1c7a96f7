"""A real Prometheus (Debian's /usr/bin/prometheus) on loopback, scraping static targets.

The config it runs with is what a PodMonitor would give in a cluster: each target carries the
labels `namespace`, `broker`, `pod` and `container` (the operator: `namespace`, `pod`, `job`),
set here as `static_configs` labels.  Scrape and rule evaluation run every second, so a rate
over 15 s (`$__rate_interval` in the tests) has enough samples.  The TSDB lives in a
temporary directory; stop() ends the process with SIGTERM.  A missing binary raises: the
tests that need it fail, they never skip.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .control_plane import free_port, terminate

PROMETHEUS = "prometheus"
PROMTOOL = "promtool"
SCRAPE_INTERVAL = "1s"
READY_TIMEOUT_S = 60.0
QUERY_TIMEOUT_S = 30.0


def binary(name: str) -> str:
    """The path of a Prometheus binary; its absence is an error (scripts/setup.sh installs it)."""
    found = shutil.which(name)
    if found is None:
        raise AssertionError(f"{name} not found on PATH: run ./scripts/setup.sh (it installs "
                             f"Debian's prometheus package)")
    return found


@dataclass(frozen=True)
class Target:
    """One scrape target: host:port and the labels Kubernetes service discovery would add."""

    job: str
    address: str
    labels: dict[str, str] = field(default_factory=dict)
    scrape_interval: str = SCRAPE_INTERVAL
    """Also its scrape timeout: longer for a target whose process is starved of CPU on
    purpose, which cannot answer /metrics within a second."""


class QueryError(AssertionError):
    """Prometheus answered a query with an error (a parse error, a bad range...)."""


class PrometheusApi:
    """Prometheus' HTTP API at `url` (a running server: ours, one given on a command line, or
    a pod's through the API server's proxy, which needs `headers` and a TLS `context`)."""

    def __init__(self, url: str, *, headers: dict[str, str] | None = None,
                 context: ssl.SSLContext | None = None) -> None:
        self.url = url.rstrip("/")
        self.headers = headers or {}
        self.context = context

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the `data` of a success, QueryError with the message if not."""
        query = urllib.parse.urlencode(params)
        request = urllib.request.Request(
            f"{self.url}/api/v1/{path}" + (f"?{query}" if query else ""), headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=QUERY_TIMEOUT_S,
                                        context=self.context) as answer:
                document = json.loads(answer.read())
        except urllib.error.HTTPError as error:  # 400/422: the body says why
            document = json.loads(error.read())
        if document.get("status") != "success":
            raise QueryError(f"{path} {params}: {document.get('errorType')}: "
                             f"{document.get('error')}")
        return document["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector (a scalar comes back as one sample without labels)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def query_range(self, expr: str, *, start_s: float, end_s: float,
                    step_s: float) -> list[dict[str, Any]]:
        data = self.api("query_range", query=expr, start=f"{start_s:.3f}", end=f"{end_s:.3f}",
                        step=f"{step_s:g}")
        result: list[dict[str, Any]] = data["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return found

    def rule_health(self) -> dict[str, str]:
        """Each loaded rule's evaluation health ("ok", "err", "unknown") and last error."""
        health = {}
        for group in self.api("rules")["groups"]:
            for rule in group["rules"]:
                health[rule["name"]] = rule["health"] + (
                    f": {rule['lastError']}" if rule.get("lastError") else "")
        return health


class Prometheus(PrometheusApi):
    """One Prometheus process; `targets` and `rule_files` are fixed at start()."""

    def __init__(self, directory: Path, *, targets: list[Target],
                 rule_files: list[Path] | None = None) -> None:
        self.directory = directory
        self.targets = targets
        self.rule_files = rule_files or []
        self.port = free_port()
        super().__init__(f"http://127.0.0.1:{self.port}")
        self.log_path = directory / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def config(self) -> dict[str, Any]:
        """One scrape config per job and interval; a target scraped at another interval
        than the global one is in a config of its own, its `job` label kept."""
        jobs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for target in self.targets:
            jobs.setdefault((target.job, target.scrape_interval), []).append(
                {"targets": [target.address], "labels": {"job": target.job, **target.labels}})
        scrape_configs = []
        for (job, interval), configs in jobs.items():
            scrape = {"job_name": job, "static_configs": configs}
            if interval != SCRAPE_INTERVAL:
                scrape.update(job_name=f"{job}-every-{interval}", scrape_interval=interval,
                              scrape_timeout=interval)
            scrape_configs.append(scrape)
        return {"global": {"scrape_interval": SCRAPE_INTERVAL,
                           "scrape_timeout": SCRAPE_INTERVAL,
                           "evaluation_interval": SCRAPE_INTERVAL},
                "rule_files": [str(path) for path in self.rule_files],
                "scrape_configs": scrape_configs}

    def start(self) -> None:
        assert self.process is None
        config_path = self.directory / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(self.config()))
        argv = [binary(PROMETHEUS), f"--config.file={config_path}",
                f"--storage.tsdb.path={self.directory / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h", "--log.level=warn"]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT)
        self._wait("Prometheus ready", self._ready)

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"prometheus exited {self.process.returncode}:\n"
                                 f"{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def wait_targets_up(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until every target has been scraped successfully at least once."""
        def all_up() -> bool:
            active = self.api("targets")["activeTargets"]
            return len(active) == len(self.targets) and all(
                t["health"] == "up" for t in active)
        self._wait("every target up", all_up, timeout_s)

    def stop(self) -> int:
        if self.process is None:
            return 0
        code = terminate(self.process)
        self.process = None
        return code

    def _wait(self, what: str, done: Any, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if done():
                return
            time.sleep(0.25)
        raise AssertionError(f"{what}: not within {timeout_s:.0f} s\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run promtool; a non-zero exit is an AssertionError carrying its output."""
    done = subprocess.run([binary(PROMTOOL), *args], capture_output=True, text=True,
                          timeout=120, check=False)
    if done.returncode != 0:
        raise AssertionError(f"promtool {' '.join(args)} exited {done.returncode}:\n"
                             f"{done.stdout}\n{done.stderr}")
    return done
