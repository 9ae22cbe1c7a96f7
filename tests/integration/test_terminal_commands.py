"""`mqstore produce --url` and `mqstore consume` against the three services as processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.integration.three_services import ThreeServices
from tests.processes import MQSTORE


def _mqstore(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MQSTORE, *arguments],
                          check=False, capture_output=True, text=True, timeout=120)


def test_produce_then_consume_from_the_terminal(tmp_path: Path) -> None:
    services = ThreeServices(tmp_path, tmp_path / "data")
    for name in ("indexer", "writer", "notifier"):
        services.start(name)
    try:
        produced = _mqstore("produce", "--url", services.url("writer"), "--topic", "Demo",
                            "--count", "300", "--batch", "64", "--body-bytes", "10")
        assert produced.returncode == 0, produced.stderr
        assert produced.stdout.startswith("sent 300 messages of 10 B")
        consumed = _mqstore("consume", "--url", services.url("notifier"), "--group", "t",
                            "--topic", "Demo", "--count", "300", "--print")
        assert consumed.returncode == 0, consumed.stderr
        lines = [json.loads(line) for line in consumed.stdout.splitlines()]
        assert len(lines) == 300
        assert {line["keys"][0] for line in lines} == {f"key-{n}" for n in range(300)}
        again = _mqstore("consume", "--url", services.url("notifier"), "--group", "t",
                         "--topic", "Demo", "--wait-ms", "100")
        assert again.returncode == 0
        assert "received and committed 0 messages" in again.stderr  # resumed after commits
        bad = _mqstore("produce", "--url", services.url("writer"), "--topic", "no spaces!",
                       "--count", "1")
        assert bad.returncode == 2
        assert "MESSAGE_ILLEGAL" in bad.stderr
    finally:
        assert services.stop_all() == {"notifier": 0, "writer": 0, "indexer": 0}


def test_produce_needs_exactly_one_target() -> None:
    both = _mqstore("produce", "somewhere", "--url", "http://127.0.0.1:1")
    neither = _mqstore("produce")
    assert (both.returncode, neither.returncode) == (2, 2)
    assert "not both" in both.stderr
