"""Run the Java scenarios (`java/clients/src`) with Apache RocketMQ's remoting client.

Each scenario is one JVM: `org.mqstore.clients.Main SCENARIO --namesrv H:P --topic T ...`,
which prints one JSON line with its verdict (`ok`, `missing`, `duplicates`, `mismatches`, ...).
The same sources compile against rocketmq-client 4.9.8 and 5.5.0 (`CLIENT_VERSIONS`).

Typical use::

    clients = JavaClients.build("5.5.0")
    result = clients.run("produce", namesrv="127.0.0.1:9876", topic="t1", mode="batch")
    assert result["ok"], result
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.remoting_clients.maven_build import CACHE_ROOT, REPO_ROOT, BuildError, build

CLIENTS_PROJECT = REPO_ROOT / "tests" / "remoting_clients" / "java" / "clients"
MAIN_CLASS = "org.mqstore.clients.Main"
CLIENT_4 = "4.9.8"
"""The newest 4.9.x on Maven Central."""
CLIENT_5 = "5.5.0"
CLIENT_VERSIONS = (CLIENT_4, CLIENT_5)
SCENARIO_TIMEOUT_S = 300

CLIENT_LOG_DIR = CACHE_ROOT / "client-logs"
JVM_OPTIONS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    # A short-lived client: the C1 compiler alone starts faster and is enough.
    "-XX:TieredStopAtLevel=1",
    # The client rebalances every 20 s by default; new consumers would wait that long when
    # the broker's "consumer ids changed" notice is not acted on.
    "-Drocketmq.client.rebalance.waitInterval=2000",
    # The clients' own logs (4.9.x: rocketmq.client.logRoot; 5.x: rocketmq.log.root).
    f"-Drocketmq.client.logRoot={CLIENT_LOG_DIR}",
    f"-Drocketmq.log.root={CLIENT_LOG_DIR}",
    "-Drocketmq.client.logLevel=WARN",
    "-Drocketmq.log.level=warn",
)


class ScenarioError(RuntimeError):
    """The JVM failed or printed no result line. Tests fail on this, never skip."""


def json_lines(stdout: str) -> Iterator[dict[str, Any]]:
    """The JSON objects among stdout's lines (the clients' loggers may print other lines)."""
    for line in stdout.splitlines():
        if line.startswith("{"):
            yield json.loads(line)


def option_args(options: dict[str, object]) -> list[str]:
    """{"body_bytes": 1024} -> ["--body-bytes", "1024"]; booleans as "true"/"false"."""
    argv = []
    for name, value in options.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        argv += [f"--{name.replace('_', '-')}", text]
    return argv


@dataclass(frozen=True)
class JavaClients:
    java: str
    classpath: str
    version: str

    @classmethod
    def build(cls, version: str = CLIENT_5) -> JavaClients:
        jars = build(CLIENTS_PROJECT, version, required_jar=f"rocketmq-client-{version}.jar")
        return cls(java=jars.java, classpath=jars.classpath, version=version)

    def argv(self, scenario: str, *, namesrv: str, topic: str, options: dict[str, object],
             jvm_options: tuple[str, ...] = JVM_OPTIONS) -> list[str]:
        """The command line of one scenario (the benchmark passes its own `jvm_options`)."""
        CLIENT_LOG_DIR.mkdir(parents=True, exist_ok=True)
        return [self.java, *jvm_options, "-cp", self.classpath, MAIN_CLASS, scenario,
                "--namesrv", namesrv, "--topic", topic, *option_args(options)]

    def run(self, scenario: str, *, namesrv: str, topic: str,
            jvm_options: tuple[str, ...] = JVM_OPTIONS, **options: object) -> dict[str, Any]:
        """Runs one scenario to its end; returns its result line (with `ok`).  `jvm_options`
        replace JVM_OPTIONS (e.g. `(*JVM_OPTIONS, "-Dtls.enable=true")`)."""
        argv = self.argv(scenario, namesrv=namesrv, topic=topic, options=options,
                         jvm_options=jvm_options)
        return self._result(scenario, argv)

    def check_selftest(self) -> dict[str, Any]:
        """The Checker's verdicts on messages spoiled one field at a time (no server)."""
        CLIENT_LOG_DIR.mkdir(parents=True, exist_ok=True)
        scenario = "check-selftest"
        return self._result(scenario, [self.java, *JVM_OPTIONS, "-cp", self.classpath,
                                       MAIN_CLASS, scenario])

    def _result(self, scenario: str, argv: list[str]) -> dict[str, Any]:
        what = f"{scenario} (rocketmq-client {self.version})"
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, encoding="utf-8",
                                  errors="replace", timeout=SCENARIO_TIMEOUT_S, check=False,
                                  cwd=Path(CLIENT_LOG_DIR))
        except subprocess.TimeoutExpired as exc:
            raise ScenarioError(f"{what} timed out after {SCENARIO_TIMEOUT_S}s") from exc
        results = [line for line in json_lines(proc.stdout) if line.get("scenario") == scenario]
        if proc.returncode != 0 or len(results) != 1:
            raise ScenarioError(f"{what} exited {proc.returncode} with {len(results)} result "
                                f"lines\n--- stdout ---\n{proc.stdout[-4000:]}\n"
                                f"--- stderr ---\n{proc.stderr[-8000:]}")
        return results[0]


def assert_every_message_once(result: dict[str, Any], *, count: int) -> None:
    """A produce or push scenario's verdict: `count` sent, expected and received, none
    missing, none twice, none different."""
    assert result["sent"] == count, result
    assert result["expected"] == count, result
    assert result["received"] == count, result
    assert result["missingCount"] == 0, result
    assert result["duplicates"] == 0, result
    assert result["mismatches"] == [], result
    assert result["ok"] is True, result


__all__ = ["CLIENT_VERSIONS", "BuildError", "JavaClients", "ScenarioError",
           "assert_every_message_once"]
