"""Which implementation the code running once per record picks, checked in a fresh
interpreter per environment, for both extensions: the engine's codecs
(storage/format/compiled.py, `_records`) and the data source's record walk
(pipeline/compiled_walk.py, `_walk`).  MQSTORE_NO_EXTENSIONS=1 picks the Python references,
no setting picks the C twins, and a missing extension is an ImportError naming the fix."""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys

import pytest

from mqstore.storage.format import compiled, java_hash, properties, record


@dataclasses.dataclass(frozen=True)
class Extension:
    module: str
    picked: str
    """Code that prints, for each function the extension twins, "reference" or "compiled"."""
    importer: str
    """A module that picks at import."""


RECORDS = Extension("mqstore.storage.format._records", """
from mqstore.storage.format import compiled, java_hash, properties, record
picked = [record.check_record is record.check_record_reference,
          java_hash.java_string_hash is java_hash.java_string_hash_reference,
          properties.decode_properties is properties.decode_properties_reference]
print(" ".join("reference" if reference else "compiled" for reference in picked))
""", "mqstore.storage.format.record")
WALK = Extension("mqstore.storage.format._walk", """
from mqstore.pipeline import decode, record_columns, walk
picked = [walk.walk_starts is walk.walk_starts_reference,
          decode.decode_heads is decode.decode_heads_reference,
          record_columns.record_columns is record_columns.record_columns_reference]
print(" ".join("reference" if reference else "compiled" for reference in picked))
""", "mqstore.pipeline.walk")
EXTENSIONS = pytest.mark.parametrize("extension", [RECORDS, WALK], ids=["records", "walk"])


def _missing(extension: Extension) -> str:
    return (f"import sys\n"
            f"sys.modules[{extension.module!r}] = None  # as if it was never built\n"
            f"import {extension.importer}\n")


def _run(code: str, setting: str | None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items()
                   if key != "MQSTORE_NO_EXTENSIONS"}
    if setting is not None:
        environment["MQSTORE_NO_EXTENSIONS"] = setting
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                          text=True, timeout=60, check=False)


@EXTENSIONS
@pytest.mark.parametrize(("setting", "expected"), [
    ("1", "reference reference reference"),
    (None, "compiled compiled compiled"),
    ("0", "compiled compiled compiled"),
])
def test_the_environment_picks_the_implementation(extension: Extension, setting: str | None,
                                                  expected: str) -> None:
    run = _run(extension.picked, setting)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == expected


@EXTENSIONS
def test_a_missing_extension_fails_loudly_with_the_fix(extension: Extension) -> None:
    run = _run(_missing(extension), None)
    assert run.returncode != 0
    last_line = run.stderr.strip().splitlines()[-1]
    assert last_line.startswith(f"ImportError: mqstore's C extension {extension.module} ")
    assert "run scripts/setup.sh, or set MQSTORE_NO_EXTENSIONS=1" in last_line


@EXTENSIONS
def test_a_missing_extension_is_fine_when_disabled(extension: Extension) -> None:
    run = _run(_missing(extension), "1")
    assert run.returncode == 0, run.stderr


def test_an_unknown_setting_is_refused() -> None:
    run = _run(RECORDS.picked, "yes")
    assert run.returncode != 0
    assert "MQSTORE_NO_EXTENSIONS='yes'" in run.stderr


def test_the_picked_functions_pickle_by_name() -> None:
    """Like the Python functions, the C twins pickle as a reference to their module's name
    (a Spark job ships functions that use them to its workers)."""
    for function in (record.check_record, java_hash.java_string_hash,
                     properties.decode_properties):
        assert pickle.loads(pickle.dumps(function)) is function


@pytest.mark.parametrize("name", ["_records", "_walk"])
def test_a_build_of_another_source_version_is_refused_as_stale(name: str) -> None:
    with pytest.raises(ImportError, match=r"is a stale build \(ABI \d+, expected 999\): "
                                          r"run scripts/setup.sh"):
        compiled.load(name, 999)
