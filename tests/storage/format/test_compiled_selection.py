"""Which implementation each codec module picks (storage/format/compiled.py), checked in a
fresh interpreter per environment: MQSTORE_NO_EXTENSIONS=1 picks the Python references,
no setting picks the C twins, and a missing extension is an ImportError naming the fix."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from mqstore.storage.format import java_hash, properties, record

PICKED = """
from mqstore.storage.format import java_hash, properties, record
picked = [record.check_record is record.check_record_reference,
          java_hash.java_string_hash is java_hash.java_string_hash_reference,
          properties.decode_properties is properties.decode_properties_reference]
print(" ".join("reference" if reference else "compiled" for reference in picked))
"""
MISSING = """
import sys
sys.modules["mqstore.storage.format._records"] = None  # as if it was never built
import mqstore.storage.format.record
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
    assert last_line.startswith("ImportError: mqstore's C extension")
    assert "run scripts/setup.sh, or set MQSTORE_NO_EXTENSIONS=1" in last_line


def test_a_missing_extension_is_fine_when_disabled() -> None:
    run = _run(MISSING, "1")
    assert run.returncode == 0, run.stderr


def test_an_unknown_setting_is_refused() -> None:
    run = _run(PICKED, "yes")
    assert run.returncode != 0
    assert "MQSTORE_NO_EXTENSIONS='yes'" in run.stderr


def test_the_picked_functions_pickle_by_name() -> None:
    """Like the Python functions, the C twins pickle as a reference to their module's name
    (a Spark job ships functions that use them to its workers)."""
    for function in (record.check_record, java_hash.java_string_hash,
                     properties.decode_properties):
        assert pickle.loads(pickle.dumps(function)) is function
