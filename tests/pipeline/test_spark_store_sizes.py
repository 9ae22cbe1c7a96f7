"""On Spark, stores made by other tools (issue 18, Found 5 and 7): a write into a store
`mqstore produce` made, reindex writing index files of the store's own length, export
refusing an existing output through Spark's file system, and a job run from the command
line that shows no JVM warnings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mqstore.pipeline.job_export import export
from mqstore.services.cli.command import main
from mqstore.storage import MessageStore


def _produced(directory: Path, count: int) -> Path:
    assert main(["produce", str(directory), "--count", str(count), "--segment-mib", "1",
                 "--body-bytes", "100"]) == 0
    return directory


def test_a_write_into_a_store_made_by_produce(spark: Any, tmp_path: Path) -> None:
    directory = _produced(tmp_path / "store", 20)
    frame = spark.createDataFrame([("Demo", 0, b"from spark", ["spark-key"])],
                                  "topic string, queue_id int, body binary, keys array<string>")
    frame.write.format("mqstore").mode("append").save(str(directory))
    with MessageStore.open(directory) as store:        # the store's own sizes
        assert sum(1 for _ in store.iter_messages()) == 21
        assert store.wait_dispatched(timeout_ms=30_000)
        assert [bytes(m.body) for m in store.query_by_key("Demo", "spark-key")] == \
            [b"from spark"]


def test_reindex_writes_index_files_of_the_stores_length(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = _produced(tmp_path / "store", 50)
    output = tmp_path / "rebuilt"
    assert main(["pipeline", "reindex", str(directory), str(output)]) == 0, \
        capsys.readouterr().err
    lengths = {path.stat().st_size for kind in (directory, output)
               for path in (kind / "index").iterdir()}
    assert len(lengths) == 1
    engine = sorted((directory / "index").iterdir())
    rebuilt = sorted((output / "index").iterdir())
    assert [p.read_bytes() for p in rebuilt] == [p.read_bytes() for p in engine]


def test_export_refuses_an_existing_output_before_reading(spark: Any, tmp_path: Path) -> None:
    directory = _produced(tmp_path / "store", 5)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(FileExistsError, match="exists: give --overwrite"):
        export(spark, str(directory), f"file://{out}")
    assert export(spark, str(directory), str(out), mode="overwrite").rows == 5


def test_a_job_on_the_command_line_shows_no_jvm_warnings(tmp_path: Path) -> None:
    directory = _produced(tmp_path / "store", 5)
    environment = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-m", "mqstore.services.cli", "pipeline", "stats", str(directory),
         "--master", "local[1]", "--conf", "spark.ui.enabled=false"],
        capture_output=True, text=True, timeout=300, env=environment, check=False)
    assert done.returncode == 0, done.stderr
    assert "stored from " in done.stdout
    # The JVM's own notice of Spark 4's vector module is printed before any logging
    # starts; nothing else may be.
    assert [line for line in done.stderr.splitlines()
            if "incubator modules" not in line] == []
