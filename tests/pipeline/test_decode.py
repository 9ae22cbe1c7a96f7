"""Bulk decoding without Spark: what the data source yields for a store the engine wrote."""

from __future__ import annotations

import mmap
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from mqstore.pipeline import reader as reader_module
from mqstore.pipeline.batches import CorruptRecordError, record_batches
from mqstore.pipeline.options import OnCorrupt, ReadOptions, Selection
from mqstore.pipeline.partitions import SegmentRange
from mqstore.pipeline.reader import read_range
from mqstore.pipeline.schema import ARROW_SCHEMA
from mqstore.pipeline.walk import (
    RangeBoundaryError,
    WalkStop,
    find_record_start,
    walk_records,
)
from mqstore.storage import StoredMessage

from .conftest import SEGMENT_BYTES


def segment_files(directory: Path) -> list[Path]:
    return sorted((directory / "commitlog").iterdir())


def read_all(directory: Path, **option_fields: object) -> list[dict[str, object]]:
    options = ReadOptions(directory=str(directory), selection=Selection(), **option_fields)
    rows: list[dict[str, object]] = []
    for path in segment_files(directory):
        part = SegmentRange(str(directory), int(path.name), 0, SEGMENT_BYTES, 1 << 62)
        for batch in read_range(part, options):
            assert batch.schema.equals(ARROW_SCHEMA)
            rows.extend(batch.to_pylist())
    return rows


def assert_row_is(row: dict[str, object], message: StoredMessage) -> None:
    assert (row["topic"], row["queue_id"], row["queue_offset"], row["physical_offset"]) == (
        message.topic, message.queue_id, message.queue_offset, message.physical_offset)
    assert row["body"] == message.body
    assert row["record_size_bytes"] == message.total_size
    assert row["tags"] == message.tags
    assert tuple(row["keys"]) == message.keys  # type: ignore[arg-type]
    assert dict(row["properties"]) == message.properties  # type: ignore[arg-type]
    born, stored = row["born_timestamp"], row["store_timestamp"]
    assert int(born.timestamp() * 1000) == message.born_timestamp_ms  # type: ignore[attr-defined]
    assert int(stored.timestamp() * 1000) == message.store_timestamp_ms  # type: ignore[attr-defined]
    assert (row["born_host"], row["store_host"]) == (message.born_host, message.store_host)
    assert row["msg_id"] == message.msg_id
    assert (row["sysflag"], row["flag"]) == (message.sysflag, message.flag)


def test_every_message_decodes_to_the_engines_fields(
        written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, stored = written_store
    rows = read_all(directory)
    assert len(rows) == len(stored)
    for row, message in zip(rows, stored, strict=True):
        assert_row_is(row, message)
    assert any(row["born_host"].startswith("[2001:db8::7]") for row in rows)  # type: ignore[union-attr]
    assert any(row["properties"] for row in rows)


def test_ranges_of_a_segment_cover_each_record_once(
        written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, _ = written_store
    path = segment_files(directory)[0]
    base = int(path.name)
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
        whole = walk_records(view, base=base, range_start=0, range_end=len(view),
                             limit=len(view))
        assert whole.stop is WalkStop.BLANK
        pieces = []
        for range_start in range(0, SEGMENT_BYTES, 5000):
            start = find_record_start(view, base=base, from_position=range_start,
                                      limit=len(view))
            if start is None or start >= range_start + 5000:
                continue
            walk = walk_records(view, base=base, range_start=start,
                                range_end=range_start + 5000, limit=len(view))
            pieces.extend(walk.starts.tolist())
        assert pieces == whole.starts.tolist()
        del whole, walk


def test_selection_filters_rows(written_store: tuple[Path, list[StoredMessage]]) -> None:
    directory, stored = written_store
    middle = stored[len(stored) // 2].physical_offset
    selection = Selection(topics=frozenset({"Orders"}), queue_ids=frozenset({0, 2}),
                          physical_offset_start=middle)
    rows = []
    for path in segment_files(directory):
        with path.open("rb") as file, mmap.mmap(file.fileno(), 0,
                                                access=mmap.ACCESS_READ) as view:
            walk = walk_records(view, base=int(path.name), range_start=0, range_end=len(view),
                                limit=len(view))
            with memoryview(view) as buffer:
                for batch in record_batches(buffer, directory=str(directory),
                                            base=int(path.name), starts=walk.starts,
                                            selection=selection, verify_crc=False,
                                            on_corrupt=OnCorrupt.FAIL, batch_rows=64):
                    rows.extend(batch.to_pylist())
    expected = [m for m in stored if m.topic == "Orders" and m.queue_id in (0, 2)
                and m.physical_offset >= middle]
    assert [row["physical_offset"] for row in rows] == [m.physical_offset for m in expected]


@pytest.fixture
def damaged_store(tmp_path: Path, written_store: tuple[Path, list[StoredMessage]]
                  ) -> tuple[Path, StoredMessage]:
    """A copy with one body byte flipped: only a CRC check can see it."""
    source, stored = written_store
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    victim = next(m for m in stored[100:] if len(m.body) > 10 and "[" not in m.born_host)
    segment = victim.physical_offset - victim.physical_offset % SEGMENT_BYTES
    path = copy / "commitlog" / f"{segment:020d}"
    data = bytearray(path.read_bytes())
    body_at = victim.physical_offset - segment + 88 + 5
    data[body_at] ^= 0xFF
    path.write_bytes(bytes(data))
    return copy, victim


def test_crc_mismatch_fails_with_its_offset_or_is_skipped(
        damaged_store: tuple[Path, StoredMessage]) -> None:
    directory, victim = damaged_store
    assert len(read_all(directory, verify_crc=False)) == 900  # nothing looks wrong without it
    with pytest.raises(CorruptRecordError, match=str(victim.physical_offset)) as raised:
        read_all(directory)  # verifyCrc is on by default
    assert [c.physical_offset for c in raised.value.corruptions] == [victim.physical_offset]
    rows = read_all(directory, verify_crc=True, on_corrupt=OnCorrupt.SKIP)
    assert len(rows) == 899
    assert victim.physical_offset not in {row["physical_offset"] for row in rows}


def test_bad_magic_is_reported_and_skipped_to_the_next_record(
        tmp_path: Path, written_store: tuple[Path, list[StoredMessage]]) -> None:
    source, stored = written_store
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    victim = stored[3]
    path = copy / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[victim.physical_offset + 4:victim.physical_offset + 8] = b"\x00\x01\x02\x03"
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match=f"{victim.physical_offset}: bad magic"):
        read_all(copy)
    rows = read_all(copy, on_corrupt=OnCorrupt.SKIP)
    assert [row["physical_offset"] for row in rows] == [
        m.physical_offset for m in stored if m is not victim]


def test_a_zeroed_page_is_damage_not_the_end_of_the_segment(
        tmp_path: Path, written_store: tuple[Path, list[StoredMessage]]) -> None:
    source, stored = written_store
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    first_segment = [m for m in stored if m.physical_offset < SEGMENT_BYTES]
    page = first_segment[len(first_segment) // 3].physical_offset // 4096 * 4096 + 4096
    assert page + 4096 < first_segment[-1].physical_offset
    path = copy / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[page:page + 4096] = bytes(4096)
    path.write_bytes(bytes(data))
    touched = {m.physical_offset for m in first_segment
               if m.physical_offset < page + 4096 and m.physical_offset + m.total_size > page}
    with pytest.raises(CorruptRecordError, match=str(min(touched))):
        read_all(copy)
    rows = read_all(copy, on_corrupt=OnCorrupt.SKIP)
    assert [row["physical_offset"] for row in rows] == [
        m.physical_offset for m in stored if m.physical_offset not in touched]


def test_a_range_that_disagrees_with_its_neighbour_fails(
        written_store: tuple[Path, list[StoredMessage]], monkeypatch: pytest.MonkeyPatch) -> None:
    directory, stored = written_store
    options = ReadOptions(directory=str(directory), selection=Selection())
    second = stored[1].physical_offset
    part = SegmentRange(str(directory), 0, second, second + 1, 1 << 62)
    rows = pa.Table.from_batches(list(read_range(part, options)))
    assert rows.column("physical_offset").to_pylist() == [second]

    real = reader_module.find_record_start

    def misplaced(view: object, *, base: int, from_position: int, limit: int) -> int | None:
        found = real(view, base=base, from_position=from_position, limit=limit)
        return found if from_position == 0 or found is None else found + 8

    monkeypatch.setattr(reader_module, "find_record_start", misplaced)
    with pytest.raises(RangeBoundaryError, match="starts at"):
        list(read_range(SegmentRange(str(directory), 0, 0, 1, 1 << 62), options))
