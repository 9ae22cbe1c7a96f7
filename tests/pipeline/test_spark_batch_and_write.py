"""On Spark: batch reads return exactly the engine's messages, and writes read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from mqstore.storage import MessageStore, StoredMessage

from .conftest import SEGMENT_BYTES, store_config, write_store
from .test_decode import assert_row_is


def test_batch_read_returns_every_message_with_its_content(
        spark: Any, written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, stored = written_store
    frame = spark.read.format("mqstore").load(str(directory))
    rows = frame.orderBy("physical_offset").collect()
    assert len(rows) == len(stored)
    for row, message in zip(rows, stored, strict=True):
        assert_row_is(row.asDict(recursive=True), message)


def test_filters_select_rows_and_prune_segments(
        spark: Any, written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, stored = written_store
    start = stored[len(stored) * 3 // 4].physical_offset
    frame = (spark.read.format("mqstore").option("topics", "Payments")
             .option("queueIds", "1,2").option("physicalOffsetStart", str(start))
             .option("maxPartitionBytes", str(SEGMENT_BYTES)).load(str(directory)))
    expected = [m.physical_offset for m in stored if m.topic == "Payments"
                and m.queue_id in (1, 2) and m.physical_offset >= start]
    got = [row.physical_offset for row in frame.orderBy("physical_offset").collect()]
    assert got == expected
    all_segments = spark.read.format("mqstore").load(str(directory)).rdd.getNumPartitions()
    assert frame.rdd.getNumPartitions() < all_segments
    split = spark.read.format("mqstore").option("maxPartitionBytes", "16384").load(str(directory))
    assert split.rdd.getNumPartitions() > all_segments
    assert split.count() == len(stored)
    by_topic = {r.topic: r["count"] for r in split.groupBy("topic").count().collect()}
    assert by_topic == {t: sum(1 for m in stored if m.topic == t) for t in by_topic}


def test_written_rows_read_back_through_the_engine_and_the_source(
        spark: Any, tmp_path: Path) -> None:
    directory = tmp_path / "store"
    write_store(directory, [], config=store_config())
    rows = [("Clicks", i % 2, f"click {i}".encode(), f"t{i % 3}" if i % 2 else None,
             [f"k{i}"] if i % 4 else [], {"n": str(i)}) for i in range(500)]
    frame = spark.createDataFrame(rows, "topic string, queue_id int, body binary, tags string, "
                                        "keys array<string>, properties map<string,string>")
    frame.repartition(3).write.format("mqstore").mode("append").save(str(directory))
    with MessageStore.open(directory, store_config()) as store:
        stored = list(store.iter_messages())
        assert store.max_offset("Clicks", 0) + store.max_offset("Clicks", 1) == 500
    assert sorted(bytes(m.body) for m in stored) == sorted(r[2] for r in rows)
    back = spark.read.format("mqstore").load(str(directory)).select(
        F.col("body").cast("string").alias("body"), "tags", "keys",
        F.col("properties")["n"].alias("n"))
    by_body = {row.body: row for row in back.collect()}
    for i in (0, 1, 5, 499):
        row = by_body[f"click {i}"]
        assert (row.tags, row.keys, row.n) == (rows[i][3], rows[i][4], str(i))
    assert not (directory / "pipeline-staging").exists()


def test_overwrite_and_bad_rows_are_refused_and_append_nothing(
        spark: Any, tmp_path: Path) -> None:
    directory = tmp_path / "store"
    write_store(directory, [], config=store_config())
    good = spark.createDataFrame([("A", 0, b"x")], "topic string, queue_id int, body binary")
    with pytest.raises(Exception, match=r"overwrite.*refused"):
        good.write.format("mqstore").mode("overwrite").save(str(directory))
    bad = spark.createDataFrame([("A", 0, b"x"), ("bad topic!", 1, b"y")],
                                "topic string, queue_id int, body binary")
    with pytest.raises(Exception, match="row 1"):
        bad.coalesce(1).write.format("mqstore").mode("append").save(str(directory))
    extra = spark.createDataFrame([("A", 0, b"x", 5)],
                                  "topic string, queue_id int, body binary, queue_offset int")
    with pytest.raises(Exception, match="unknown column"):
        extra.write.format("mqstore").mode("append").save(str(directory))
    with MessageStore.open(directory, store_config()) as store:
        assert list(store.iter_messages()) == []
