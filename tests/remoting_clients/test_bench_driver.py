"""bench/remoting_vs_rocketmq.py runs every case end to end with tiny counts, so it does not rot.

It measures the session's RocketMQ peer as an "other" system (`--no-rocketmq --namesrv`): the
same path a run against mqstore takes.  No figure is judged: timing belongs to bench/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.remoting_clients.rocketmq_peer import RocketMqPeer

pytestmark = pytest.mark.remoting_clients

SCRIPT = Path(__file__).parents[2] / "bench" / "remoting_vs_rocketmq.py"
CASES = ("produce-16", "produce-64", "batch-256", "consume", "latency-1000")


def test_every_case_moves_messages(rocketmq_peer: RocketMqPeer, tmp_path: Path) -> None:
    environment = {**os.environ, "MQSTORE_BENCH_RESULTS_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--no-rocketmq", "--flush", "async",
         "--namesrv", rocketmq_peer.namesrv, "--label", "peer",
         "--pids", ",".join(map(str, rocketmq_peer.pids)),
         "--single-count", "640", "--batch-count", "2048", "--latency-seconds", "2",
         "--warmup-count", "1024", "--settle-wait-s", "1"],
        env=environment, capture_output=True, text=True, timeout=280, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "load average" in done.stdout
    (path,) = tmp_path.glob("remoting_vs_rocketmq-*.json")
    rows = json.loads(path.read_text())["rows"]
    assert [row["case"] for row in rows] == list(CASES)
    expected_messages = {"produce-16": 640, "produce-64": 640, "batch-256": 2048,
                         "consume": 2049, "latency-1000": 2000}
    for row in rows:
        assert row["ok"] is True, row
        assert row["messages"] == expected_messages[row["case"]], row
        assert row["server_cpu_us_per_msg"] >= 0, row
