"""`mqstore pipeline`: input refused before Spark starts, and what `stats` prints (issue 18,
Found 7: an export into an existing path ran 89 s, then failed with a Py4J traceback;
`stats` printed no time range).  No JVM: `build_session` is replaced, so a test that would
start Spark fails instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import mqstore.pipeline.cli as pipeline_cli
from mqstore.pipeline import job_stats, session
from mqstore.pipeline.job_stats import QueueStats
from mqstore.services.cli.command import main

ROW = QueueStats(topic="Orders", queue_id=1, messages=3, body_bytes=30, record_bytes=400,
                 first_store_ms=1_764_000_000_123, last_store_ms=1_764_000_060_007,
                 min_queue_offset=0, max_queue_offset=2, gaps=0, missing_offsets=0,
                 duplicate_offsets=0)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    assert main(["produce", str(tmp_path / "store"), "--count", "3", "--segment-mib", "1"]) == 0
    return tmp_path / "store"


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(**_: Any) -> None:
        raise AssertionError("Spark was started")
    monkeypatch.setattr(session, "build_session", refuse)


@pytest.mark.usefixtures("no_spark")
def test_export_into_an_existing_path_is_refused_before_spark_starts(
        store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert main(["pipeline", "export", str(store), str(out)]) == 2
    error = capsys.readouterr().err
    assert "exists: give --overwrite" in error
    assert len(error.splitlines()) == 1
    assert main(["pipeline", "export", str(store), f"file://{out}"]) == 2


@pytest.mark.usefixtures("no_spark")
def test_overwrite_and_another_mode_contradict(store: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", "export", str(store), str(tmp_path / "new"), "--overwrite",
                 "--mode", "append"]) == 2
    assert "--overwrite with --mode append" in capsys.readouterr().err


class _Session:
    """What `run` needs of a session when the job itself is replaced."""


def test_stats_prints_its_time_range(store: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(session, "build_session", lambda **_: _Session())
    monkeypatch.setattr(job_stats, "queue_stats", lambda *_, **__: [ROW])
    assert main(["pipeline", "stats", str(store)]) == 0
    out = capsys.readouterr().out
    assert "stored from 2025-11-24T16:00:00.123Z to 2025-11-24T16:01:00.007Z" in out
    assert "2025-11-24T16:00:00.123Z" in out.splitlines()[-1]


def test_stats_lines_of_no_queue() -> None:
    assert pipeline_cli.stats_lines([]) == ["no messages"]


class Py4JJavaError(Exception):
    """Stands for py4j's: a Java exception's text, many lines of stack."""


Py4JJavaError.__module__ = "py4j.protocol"


def test_a_failed_spark_job_is_one_line_and_exit_1(store: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    def fail(*_: Any, **__: Any) -> None:
        raise Py4JJavaError("An error occurred while calling o42.save.\n"
                            "\tat org.apache.spark.sql.Dataset.ofRows(Dataset.scala:1)")
    monkeypatch.setattr(session, "build_session", lambda **_: _Session())
    monkeypatch.setattr(job_stats, "queue_stats", fail)
    assert main(["pipeline", "stats", str(store)]) == 1
    assert capsys.readouterr().err == ("mqstore pipeline stats: the Spark job failed: An error "
                                       "occurred while calling o42.save.\n")
