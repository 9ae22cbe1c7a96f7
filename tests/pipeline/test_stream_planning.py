"""Streaming offsets and planning without Spark: JSON, rate limits, consume queue scans."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from mqstore.pipeline.queue_scan import DataLossError, QueueScanner, read_entries
from mqstore.pipeline.stream_offsets import cap_by_rows, offsets_from_json, offsets_to_json
from mqstore.pipeline.stream_read import QueueRange
from mqstore.pipeline.stream_reader import MqstoreStreamReader
from mqstore.pipeline.stream_settings import parse_stream_settings
from mqstore.storage import StoredMessage

from .conftest import SEGMENT_BYTES, sample_messages, write_store


def test_offsets_round_trip_through_json() -> None:
    offsets = {("Orders", 0): 12, ("Orders", 3): 0, ("Logs", 1): 7}
    as_json = offsets_to_json(offsets)
    assert as_json == {"Logs": {"1": 7}, "Orders": {"0": 12, "3": 0}}
    assert offsets_from_json(as_json) == offsets
    assert offsets_from_json('{"A": {"0": -2, "1": -1}}', allow_special=True) == {
        ("A", 0): -2, ("A", 1): -1}


@pytest.mark.parametrize(("text", "message"), [
    ("[1]", "expected an object"),
    ('{"A": 3}', "must map queue ids"),
    ('{"A": {"x": 3}}', "queue id 'x'"),
    ('{"A": {"0": -2}}', "must be an integer >= 0"),
    ('{"A": {"0": 1.5}}', "must be an integer"),
    ("{nope", "not JSON"),
])
def test_bad_offsets_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        offsets_from_json(text)


def test_stream_settings() -> None:
    settings = parse_stream_settings({"startingOffsets": '{"A": {"0": -2}}',
                                      "maxMessagesPerTrigger": "10"})
    assert settings.starting_offsets == {("A", 0): -2}
    assert settings.max_messages_per_trigger == 10
    with pytest.raises(ValueError, match="maxMessagesPerTrigger"):
        parse_stream_settings({"maxMessagesPerTrigger": "0"})
    with pytest.raises(ValueError, match="startingOffsets"):
        parse_stream_settings({"startingOffsets": "newest"})


def test_rate_limit_shares_rows_by_backlog_and_always_progresses() -> None:
    start = {("A", 0): 0, ("A", 1): 10}
    end = {("A", 0): 100, ("A", 1): 20, ("B", 0): 5}
    capped = cap_by_rows(start, end, 23)
    assert sum(capped[k] - start.get(k, 0) for k in capped) == 23
    assert all(start.get(k, 0) <= capped[k] <= end[k] for k in end)
    assert capped[("A", 0)] > capped[("A", 1)] - 10
    assert cap_by_rows(start, end, 1000) == end
    one = cap_by_rows(start, end, 1)
    assert sum(one[k] - start.get(k, 0) for k in one) == 1


def test_queue_bounds_and_entries_match_the_engine(
        written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, stored = written_store
    scanner = QueueScanner(str(directory), segment_size_bytes=SEGMENT_BYTES)
    in_queue = [m for m in stored if (m.topic, m.queue_id) == ("Orders", 0)]
    bounds = scanner.bounds(("Orders", 0))
    assert bounds is not None
    assert (bounds.min_offset, bounds.max_offset) == (0, len(in_queue))
    offsets, entries = read_entries(str(directory), ("Orders", 0), start_offset=2,
                                    end_offset=len(in_queue), from_earliest=False)
    assert offsets.tolist() == list(range(2, len(in_queue)))
    assert entries["physical_offset"].tolist() == [m.physical_offset for m in in_queue[2:]]


def test_planner_offsets_rate_limit_and_available_now(
        tmp_path: Path, written_store: tuple[Path, list[StoredMessage]]) -> None:
    source, stored = written_store
    directory = tmp_path / "store"
    shutil.copytree(source, directory)
    reader = MqstoreStreamReader({"path": str(directory), "startingOffsets": "earliest",
                                  "maxMessagesPerTrigger": "100", "topics": "Orders"})
    start = reader.initialOffset()
    assert set(start) == {"Orders"}
    assert isinstance(reader.getDefaultReadLimit(), ReadMaxRows)
    end = reader.latestOffset(start, ReadMaxRows(100))
    rows = sum(offsets_from_json(end).values()) - sum(offsets_from_json(start).values())
    assert rows == 100
    parts = reader.partitions(start, end)
    assert all(isinstance(p, QueueRange) and p.topic == "Orders" for p in parts)
    assert sum(p.end_offset - p.start_offset for p in parts) == 100
    reader.prepareForTriggerAvailableNow()
    write_store(directory, sample_messages(30, first=900))  # after the query started
    frozen = reader.latestOffset(start, ReadAllAvailable())
    orders = sum(1 for m in stored if m.topic == "Orders")
    assert sum(offsets_from_json(frozen).values()) == orders
    later = MqstoreStreamReader({"path": str(directory), "topics": "Orders"})
    assert sum(offsets_from_json(later.initialOffset()).values()) == orders + 10


def test_offsets_without_their_files_are_a_data_loss(
        written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, _ = written_store
    with pytest.raises(DataLossError, match="has no file for offset 1000000"):
        read_entries(str(directory), ("Orders", 0), start_offset=10**6, end_offset=10**6 + 1,
                     from_earliest=False)
