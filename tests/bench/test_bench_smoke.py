"""The HTTP benchmarks run end to end with tiny parameters, so that they do not rot.

Each script starts its servers (mqstore's services, redis-server), runs every kind of load it
has for a fraction of a second and writes its JSON; the test checks that every case ran and
moved messages.  No figure is judged here: timing targets belong to bench/, not to tests.
Needs redis-server (scripts/setup.sh installs it); without it the scripts fail loudly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).parents[2] / "bench"


def run_bench(tmp_path: Path, script: str, *arguments: str) -> dict[str, Any]:
    environment = {**os.environ, "MQSTORE_BENCH_RESULTS_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(BENCH / script), *arguments], env=environment,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "load average" in done.stdout
    (path,) = tmp_path.glob(f"{script.removesuffix('.py')}-*.json")
    document: dict[str, Any] = json.loads(path.read_text())
    assert document["conditions"]["load_average_end"] is not None
    return document


def test_http_produce(tmp_path: Path) -> None:
    document = run_bench(tmp_path, "http_produce.py", "--seconds", "0.3", "--warmup-seconds",
                         "0.1", "--runs", "1", "--cases", "json-1", "bin-256",
                         "--redis-cases", "xadd-1", "raw-p64", "py-p256", "c-p64",
                         "--flush", "async")
    cases = {(row["target"], row["case"]) for row in document["rows"]}
    assert cases == {("mqstore/uvloop", "json-1"), ("mqstore/uvloop", "bin-256"),
                     ("redis-streams", "xadd-1"), ("redis-streams", "raw-p64"),
                     ("redis-streams", "py-p256"), ("redis-streams", "c-p64")}
    for row in document["rows"]:
        assert row["msg_per_s"]["median"] > 0, row
        assert row["server_cpu_us_per_msg"] >= 0, row  # /proc counts 10 ms ticks


def test_http_latency(tmp_path: Path) -> None:
    document = run_bench(tmp_path, "http_latency.py", "--rates", "100", "--seconds", "0.5",
                         "--warmup-seconds", "0.2", "--runs", "1")
    rows = {row["consumer"]: row for row in document["rows"]}
    assert set(rows) == {"pull", "group", "xread"}
    for row in rows.values():
        assert row["missing"] == 0, row
        assert 0 < row["p50_ms"] <= row["p99_ms"] <= row["max_ms"], row
        assert row["cpu_share"]["producer"] > 0, row
    assert {"writer", "indexer", "notifier"} <= set(rows["pull"]["cpu_share"])


def test_http_consume(tmp_path: Path) -> None:
    document = run_bench(tmp_path, "http_consume.py", "--messages", "1200", "--runs", "1")
    rates = {(row["target"], row["case"], row["queues"]): row["msg_per_s"]["median"]
             for row in document["rows"] if "queues" in row}
    assert set(rates) == {(target, case, queues) for target, case in (
        ("mqstore", "pull-32"), ("mqstore", "group-256"), ("redis", "xrange-32"),
        ("redis", "xread-32")) for queues in (72, 600)}
    assert all(rate > 0 for rate in rates.values()), rates
    ratios = [row for row in document["rows"] if "ratio" in row]
    assert len(ratios) == 4
