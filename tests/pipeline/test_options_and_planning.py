"""Options, schema mapping, partition planning and segment pruning: plain Python, no Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from mqstore.pipeline.options import OnCorrupt, Selection, parse_read_options
from mqstore.pipeline.partitions import plan_partitions
from mqstore.pipeline.reader import MqstoreReader
from mqstore.pipeline.schema import ARROW_SCHEMA, SPARK_SCHEMA, check_write_schema
from mqstore.pipeline.store_config import store_config_from_options
from mqstore.pipeline.store_files import SegmentInfo, StoreFiles, load_store_files
from mqstore.storage import StoredMessage

from .conftest import SEGMENT_BYTES


def test_options_parse_with_units_and_case_insensitive_names() -> None:
    options = parse_read_options({"path": "/data", "Topics": "A, B", "queueids": "0,3",
                                  "physicalOffsetStart": "100", "STORETIMESTAMPENDMS": "5",
                                  "onCorruptRecord": "skip", "verifyCrc": "true"})
    assert options.directory == "/data"
    assert options.selection.topics == frozenset({"A", "B"})
    assert options.selection.queue_ids == frozenset({0, 3})
    assert options.selection.physical_offset_start == 100
    assert options.selection.store_timestamp_end_ms == 5
    assert options.on_corrupt is OnCorrupt.SKIP
    assert options.verify_crc is True


@pytest.mark.parametrize(("options", "message"), [
    ({}, "no store directory"),
    ({"path": "/d", "queueIds": "1,x"}, "queueIds='1,x'"),
    ({"path": "/d", "physicalOffsetStart": "-1"}, "physicalOffsetStart=-1"),
    ({"path": "/d", "physicalOffsetStart": "9", "physicalOffsetEnd": "3"}, "is after"),
    ({"path": "/d", "onCorruptRecord": "ignore"}, "expected one of fail, skip"),
    ({"path": "/d", "verifyCrc": "yes please"}, "'yes please' is not a boolean"),
    ({"path": "/d", "batchRows": "0"}, "batchRows=0"),
    ({"path": "/d", "topics": "rmq_sys_mqstore_padding"}, "filler"),
])
def test_bad_options_are_refused_naming_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_read_options(options)


def test_arrow_schema_is_what_pyspark_expects() -> None:
    assert ARROW_SCHEMA.names == SPARK_SCHEMA.fieldNames()
    assert ARROW_SCHEMA.field("body").type == pa.binary()
    assert ARROW_SCHEMA.field("store_timestamp").type == pa.timestamp("us", tz="UTC")
    assert not ARROW_SCHEMA.field("topic").nullable
    assert ARROW_SCHEMA.field("tags").nullable


def test_write_schema_names_every_problem() -> None:
    check_write_schema(StructType([StructField("topic", StringType()),
                                   StructField("queue_id", LongType()),
                                   StructField("body", StringType())]))
    with pytest.raises(ValueError) as raised:
        check_write_schema(StructType([StructField("topic", BinaryType()),
                                       StructField("queue_offset", IntegerType())]))
    text = str(raised.value)
    assert "column 'topic' is binary" in text
    assert "missing column 'queue_id'" in text
    assert "missing column 'body'" in text
    assert "unknown column(s) ['queue_offset']" in text


def fake_files(first_times: list[int | None], *, committed_position: int = 1 << 62) -> StoreFiles:
    segments = tuple(SegmentInfo(index * 1000, time) for index, time in enumerate(first_times))
    return StoreFiles(directory="/d", segment_size_bytes=1000, segments=segments,
                      committed_position=committed_position, min_position=0)


def test_offset_and_time_ranges_prune_segments() -> None:
    files = fake_files([100, 200, 300, 400, None])
    everything = plan_partitions(files, Selection(), max_partition_bytes=1000)
    assert [p.segment_start for p in everything] == [0, 1000, 2000, 3000]  # the last is empty
    by_offset = plan_partitions(files, Selection(physical_offset_start=1500,
                                                 physical_offset_end=2500),
                                max_partition_bytes=1000)
    assert [p.segment_start for p in by_offset] == [1000, 2000]
    by_time = plan_partitions(files, Selection(store_timestamp_start_ms=250,
                                               store_timestamp_end_ms=300),
                              max_partition_bytes=1000)
    assert [p.segment_start for p in by_time] == [1000]
    readable = plan_partitions(fake_files([100, 200, 300], committed_position=1500), Selection(),
                               max_partition_bytes=1000)
    assert [p.segment_start for p in readable] == [0, 1000]


def test_large_segments_split_into_ranges_covering_them() -> None:
    parts = plan_partitions(fake_files([100]), Selection(), max_partition_bytes=300)
    assert [(p.range_start, p.range_end) for p in parts] == [(0, 250), (250, 500), (500, 750),
                                                              (750, 1000)]
    above = plan_partitions(fake_files([100]), Selection(physical_offset_start=600),
                            max_partition_bytes=300)
    assert [(p.range_start, p.range_end) for p in above] == [(500, 750), (750, 1000)]


def test_reader_plans_one_partition_per_segment_of_a_real_store(
        written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, stored = written_store
    files = load_store_files(directory)
    assert files.segment_size_bytes == SEGMENT_BYTES
    segments_holding = {m.physical_offset // SEGMENT_BYTES for m in stored}
    parts = MqstoreReader(parse_read_options({"path": str(directory)})).partitions()
    assert len(parts) == len(segments_holding)
    late = stored[-5].store_timestamp_ms
    pruned = MqstoreReader(parse_read_options({"path": str(directory),
                                               "storeTimestampStartMs": str(late)}))
    assert 1 <= len(pruned.partitions()) < len(parts)


def test_store_config_comes_from_the_directory_and_options(
        written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, _ = written_store
    config = store_config_from_options({"store.index_count_max": "4096",
                                        "path": "/ignored"}, directory=directory)
    assert config.segment_size_bytes == SEGMENT_BYTES
    assert config.index_count_max == 4096
    with pytest.raises(ValueError, match="no field 'segment_mib'"):
        store_config_from_options({"store.segment_mib": "1"}, directory=None)
    with pytest.raises(ValueError, match=r"store\.index_enabled: 'maybe' is not a boolean"):
        store_config_from_options({"store.index_enabled": "maybe"}, directory=None)
