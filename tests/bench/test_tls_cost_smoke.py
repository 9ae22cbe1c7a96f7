"""bench/tls_cost.py runs end to end with tiny parameters, so that it does not rot (no figure
is judged: timing targets belong to bench/)."""

from __future__ import annotations

from pathlib import Path

from tests.bench.test_bench_smoke import run_bench


def test_tls_cost(tmp_path: Path) -> None:
    document = run_bench(tmp_path, "tls_cost.py", "--seconds", "0.3", "--warmup-seconds",
                         "0.1", "--runs", "1", "--connections", "2")
    rows = {(row["case"], row["mode"]) for row in document["rows"]}
    assert rows == {(case, mode) for case in ("produce", "consume")
                    for mode in ("plaintext", "tls")}
    for row in document["rows"]:
        assert row["msg_per_s"][0] > 0, row
        assert row["server_us_per_msg"][0] >= 0, row  # /proc counts 10 ms ticks
