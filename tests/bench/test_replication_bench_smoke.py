"""bench/replication.py runs end to end with tiny parameters, so that it does not rot: every
case ran and moved messages.  No figure is judged here (timing targets belong to bench/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parents[2] / "bench"


def test_replication_bench(tmp_path: Path) -> None:
    environment = {**os.environ, "MQSTORE_BENCH_RESULTS_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(BENCH / "replication.py"), "--runs", "2", "--seconds", "0.4",
         "--slice-seconds", "0.2", "--warmup-seconds", "0.1", "--lag-seconds", "0.5",
         "--connections", "1", "2", "--with-cliff"],
        env=environment, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "p99 pool-on / pool-off" in done.stdout
    (path,) = tmp_path.glob("replication-*.json")
    document = json.loads(path.read_text())
    assert len(document["runs"]) == 2
    for run in document["runs"]:
        for case in ("sync/pool-off", "sync/pool-on", "sync/pool-on-no-demand"):
            for connections in ("1", "2"):
                row = run[case][connections]
                assert row["requests"] > 0, (case, row)
                assert row["requests_not_200"] == 0, (case, row)
                assert 0 < row["p50_ms"] <= row["p99_ms"] <= row["max_ms"], (case, row)
        for case in ("lag/pool-off", "lag/pool-on"):
            assert run[case]["messages_per_s"] > 0, run[case]
            assert run[case]["samples"] > 0, run[case]
