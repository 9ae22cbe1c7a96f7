"""An application under way while the brokers change under it: the `load` scenario of
RocketMQ's Java client (java/clients, Load.java), a sync producer at a steady rate with the
client's default retry and a push consumer of the same topic, run in the background.  The
test reads its progress while it runs and its verdict once it is stopped.

Used against `mqstore up --groups 2` with a group's front killed
(test_up_groups_clients.py) and, from the node through the external listeners, against a
cluster on the real node that is rolled and scaled (e2e/test_node_cluster_load.py)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.remoting_clients.java_clients import JavaClients, json_lines

CLIENT_RETRIES = 2
CLIENT_SEND_TIMEOUT_MS = 3000
"""RocketMQ's DefaultMQProducer defaults (retryTimesWhenSendFailed, sendMsgTimeout): the
client's retry, which no outage may outlast."""
DRAIN_TIMEOUT_S = 180
"""After the stop: how long the consumer may take to receive what was acknowledged."""
STOP_TIMEOUT_S = DRAIN_TIMEOUT_S + 60
PROGRESS_POLL_S = 0.5


@dataclass
class LoadRun:
    process: subprocess.Popen[bytes]
    work_dir: Path

    @classmethod
    def start(cls, clients: JavaClients, *, namesrv: str, topic: str, work_dir: Path,
              rate_per_s: int, threads: int, keys: tuple[str, str] | None = None,
              wrap: Callable[[list[str]], list[str]] = list,
              env: Mapping[str, str] | None = None) -> LoadRun:
        """The JVM started in `work_dir`; `wrap` prefixes its command line (`ip netns exec
        ...`), `env` replaces the environment."""
        work_dir.mkdir(parents=True, exist_ok=True)
        options: dict[str, object] = {
            "rate": rate_per_s, "threads": threads, "retries": CLIENT_RETRIES,
            "send_timeout_ms": CLIENT_SEND_TIMEOUT_MS, "drain_timeout_s": DRAIN_TIMEOUT_S,
            "stop_file": work_dir / "stop", "progress_file": work_dir / "progress.json"}
        if keys is not None:
            options.update(access_key=keys[0], secret_key=keys[1])
        argv = wrap(clients.argv("load", namesrv=namesrv, topic=topic, options=options))
        with open(work_dir / "load.out", "wb") as output:
            process = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT,
                                       cwd=work_dir, env=None if env is None else dict(env))
        return cls(process, work_dir)

    def progress(self) -> dict[str, Any]:
        """{"acked", "failed", "received", "ackedByBroker", "elapsedS"} so far ({} before the
        first write); fails the test if the JVM has exited."""
        assert self.process.poll() is None, (
            f"the load client exited {self.process.returncode}:\n{self._output()[-4000:]}")
        try:
            progress: dict[str, Any] = json.loads((self.work_dir / "progress.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return progress

    def wait_until(self, what: str, done: Callable[[dict[str, Any]], bool], *,
                   timeout_s: float) -> dict[str, Any]:
        """The progress once `done` says so; fails the test after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not done(progress := self.progress()):
            assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s: {progress}"
            time.sleep(PROGRESS_POLL_S)
        return progress

    def wait_acked(self, acked: int, *, timeout_s: float) -> dict[str, Any]:
        """The progress once at least `acked` sends were acknowledged."""
        return self.wait_until(f"{acked} acknowledged sends",
                               lambda progress: progress.get("acked", 0) >= acked,
                               timeout_s=timeout_s)

    def stop(self) -> dict[str, Any]:
        """Stop sending; the verdict once every acknowledged message came (or the drain
        timeout passed)."""
        (self.work_dir / "stop").touch()
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        finally:
            self.kill()
        lines = list(json_lines(self._output()))
        assert len(lines) == 1, f"no verdict from the load client:\n{self._output()[-4000:]}"
        return lines[0]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def _output(self) -> str:
        return (self.work_dir / "load.out").read_text(errors="replace")


def assert_nothing_lost(report: dict[str, Any]) -> None:
    """Every acknowledged message received with its body, and every one answered with
    another status (written on the master) too; no outage past the client's retry."""
    assert report["ok"], report
    assert (report["missingAcked"], report["missingOtherStatus"], report["mismatches"],
            report["foreign"]) == (0, 0, 0, 0), report
    assert report["longestOutageMs"] <= CLIENT_SEND_TIMEOUT_MS, report


def summary(report: dict[str, Any], started: float) -> str:
    """One line of the counts and times a closing note quotes."""
    keys = ("sent", "producingS", "acked", "otherStatuses", "failed", "received", "missingAcked",
            "missingOtherStatus", "duplicates", "receivedNotAnswered", "ackedPerS",
            "longestSendMs", "longestOutageMs", "ackedByBroker", "receivedByBroker",
            "failuresBySecond", "failureSamples")
    picked = {key: report.get(key) for key in keys}
    return f"{time.monotonic() - started:.1f} s: {json.dumps(picked)}"
