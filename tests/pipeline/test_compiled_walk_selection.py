"""Which record walk the data source picks (pipeline/compiled_walk.py), checked in a fresh
interpreter per environment: MQSTORE_NO_EXTENSIONS=1 picks the Python references, no
setting picks the C twins, and a missing extension is an ImportError naming the fix."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PICKED = """
from mqstore.pipeline import decode, record_columns, walk
picked = [walk.walk_starts is walk.walk_starts_reference,
          decode.decode_heads is decode.decode_heads_reference,
          record_columns.record_columns is record_columns.record_columns_reference]
print(" ".join("reference" if reference else "compiled" for reference in picked))
"""
MISSING = """
import sys
sys.modules["mqstore.storage.format._walk"] = None  # as if it was never built
import mqstore.pipeline.walk
"""


def _run(code: str, setting: str | None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items()
                   if key != "MQSTORE_NO_EXTENSIONS"}
    if setting is not None:
        environment["MQSTORE_NO_EXTENSIONS"] = setting
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.parametrize(("setting", "expected"), [
    ("1", "reference reference reference"),
    (None, "compiled compiled compiled"),
    ("0", "compiled compiled compiled"),
])
def test_the_environment_picks_the_implementation(setting: str | None, expected: str) -> None:
    run = _run(PICKED, setting)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == expected


def test_a_missing_extension_fails_loudly_with_the_fix() -> None:
    run = _run(MISSING, None)
    assert run.returncode != 0
    last_line = run.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError: mqstore's C extension mqstore.storage.format._walk")
    assert "run scripts/setup.sh, or set MQSTORE_NO_EXTENSIONS=1" in last_line


def test_a_missing_extension_is_fine_when_disabled() -> None:
    run = _run(MISSING, "1")
    assert run.returncode == 0, run.stderr
