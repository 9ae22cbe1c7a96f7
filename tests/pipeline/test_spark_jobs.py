"""On Spark: export, stats, verify and reindex, through the CLI where it matters."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from mqstore.pipeline.job_export import export
from mqstore.pipeline.job_stats import queue_stats
from mqstore.services.cli.command import main
from mqstore.storage import StoredMessage

from .conftest import SEGMENT_BYTES, sample_messages, store_config, write_store


def test_export_partitions_by_topic_and_date(
        spark: Any, tmp_path: Path, written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, stored = written_store
    result = export(spark, str(directory), str(tmp_path / "parquet"))
    assert result.rows == len(stored)
    partitions = sorted(p.relative_to(tmp_path / "parquet").as_posix()
                        for p in (tmp_path / "parquet").glob("topic=*/date=*"))
    assert {p.split("/")[0] for p in partitions} == {"topic=Orders", "topic=Payments",
                                                    "topic=Logs"}
    back = spark.read.parquet(str(tmp_path / "parquet"))
    assert back.filter("topic = 'Logs'").count() == sum(1 for m in stored if m.topic == "Logs")


def test_stats_count_bytes_and_gaps(spark: Any,
                                    written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, stored = written_store
    stats = {(s.topic, s.queue_id): s for s in queue_stats(spark, str(directory))}
    in_queue = [m for m in stored if (m.topic, m.queue_id) == ("Orders", 0)]
    orders = stats["Orders", 0]
    assert orders.messages == len(in_queue)
    assert orders.body_bytes == sum(len(m.body) for m in in_queue)
    assert orders.record_bytes == sum(m.total_size for m in in_queue)
    assert (orders.min_queue_offset, orders.max_queue_offset) == (0, len(in_queue) - 1)
    assert (orders.gaps, orders.missing_offsets, orders.duplicate_offsets) == (0, 0, 0)
    assert orders.first_store_ms == in_queue[0].store_timestamp_ms
    gapped = queue_stats(spark, str(directory), options={
        "physicalOffsetEnd": str(in_queue[5].physical_offset)})
    assert {(s.topic, s.queue_id): s.messages for s in gapped}["Orders", 0] == 5


def test_verify_cli_passes_a_clean_store_and_names_a_corrupt_offset(
        spark: Any, tmp_path: Path, written_store: tuple[Path, list[StoredMessage]],
        capsys: pytest.CaptureFixture[str]) -> None:
    directory, stored = written_store
    assert main(["pipeline", "verify", str(directory)]) == 0
    assert f"OK: {len(stored)} records" in capsys.readouterr().out
    copy = tmp_path / "copy"
    shutil.copytree(directory, copy)
    victim = next(m for m in stored if m.physical_offset >= SEGMENT_BYTES and len(m.body) > 8
                  and "[" not in m.born_host)
    segment = victim.physical_offset - victim.physical_offset % SEGMENT_BYTES
    path = copy / "commitlog" / f"{segment:020d}"
    data = bytearray(path.read_bytes())
    data[victim.physical_offset - segment + 88] ^= 0x01  # first body byte
    path.write_bytes(bytes(data))
    assert main(["pipeline", "verify", str(copy)]) == 1
    assert f"CORRUPT at physical offset {victim.physical_offset}: body CRC" in \
        capsys.readouterr().out


def test_reindex_equals_the_engines_consume_queues_and_index(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory, output = tmp_path / "store", tmp_path / "rebuilt"
    # 399 keys per index file: the ~600 keys roll over into a second file.
    write_store(directory, sample_messages(900), config=store_config(index_count_max=400))
    code = main(["pipeline", "reindex", str(directory), str(output),
                 "--store-option", "index_count_max=400", "--queue-tasks", "3"])
    assert code == 0, capsys.readouterr().err
    for kind in ("consumequeue", "index"):
        engine = sorted(p.relative_to(directory) for p in (directory / kind).rglob("*")
                        if p.is_file())
        rebuilt = sorted(p.relative_to(output) for p in (output / kind).rglob("*")
                         if p.is_file())
        if kind == "consumequeue":
            assert rebuilt == engine
        else:  # index files are named after their creation time: compare them in order
            assert len(rebuilt) == len(engine) >= 2
        for mine, theirs in zip(rebuilt, engine, strict=True):
            assert (output / mine).read_bytes() == (directory / theirs).read_bytes(), theirs
    assert main(["pipeline", "reindex", str(directory), str(output)]) == 2  # not empty
