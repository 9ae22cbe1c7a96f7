"""On Spark: a streaming query over consume queue offsets, exactly once into Parquet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import sample_messages, write_store


def run_available_now(spark: Any, directory: Path, output: Path, checkpoint: Path) -> Any:
    query = (spark.readStream.format("mqstore")
             .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "250")
             .load(str(directory))
             .select("topic", "queue_id", "queue_offset", "physical_offset", "body")
             .writeStream.format("parquet").option("path", str(output))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert not query.isActive, "availableNow did not finish within 120 s"
    assert query.exception() is None, query.exception()
    return query


def test_available_now_reads_everything_then_only_what_is_new_after_restart(
        spark: Any, tmp_path: Path) -> None:
    directory, output, checkpoint = tmp_path / "store", tmp_path / "out", tmp_path / "check"
    first = write_store(directory, sample_messages(600))
    query = run_available_now(spark, directory, output, checkpoint)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 3, "maxMessagesPerTrigger=250 must split 600 rows"
    assert max(p["numInputRows"] for p in batches) <= 250
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert sum(sum(queues.values()) for queues in end.values()) == 600
    assert spark.read.parquet(str(output)).count() == 600

    everything = write_store(directory, sample_messages(170, first=600))
    run_available_now(spark, directory, output, checkpoint)
    result = spark.read.parquet(str(output))
    expected = {(m.topic, m.queue_id, m.queue_offset, m.physical_offset) for m in everything}
    got = [(r.topic, r.queue_id, r.queue_offset, r.physical_offset) for r in result.collect()]
    assert len(got) == len(everything) == 770  # no duplicate
    assert set(got) == expected  # nothing lost
    bodies = {row.physical_offset: row.body for row in result.collect()}
    assert all(bodies[m.physical_offset] == m.body for m in everything)
    assert len(first) == 600
