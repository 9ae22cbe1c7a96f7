"""Consume queues: append, duplicates, first-file filler, truncate, reopen, corrupt tail."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.storage.files.consume_queue_file import ENTRY, ENTRY_SIZE_BYTES
from mqstore.storage.format.dispatch_scan import DispatchRecord
from mqstore.storage.queues.consume_queue import ConsumeQueue, ConsumeQueueGapError

FILE_BYTES = 10 * ENTRY_SIZE_BYTES  # ten entries a file: rolls happen quickly


def _queue(directory: Path) -> ConsumeQueue:
    return ConsumeQueue(directory, topic="T", queue_id=0, file_size_bytes=FILE_BYTES,
                        allocate_step_bytes=4096, creating_directory=directory.parent / "creating")


def _fill(queue: ConsumeQueue, count: int, *, first_offset: int = 0) -> None:
    for index in range(first_offset, first_offset + count):
        assert queue.put(physical_offset=1000 + 100 * index, size_bytes=100,
                         tags_code=index, queue_offset=index)


def test_append_rolls_files_named_by_byte_position(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    _fill(queue, 25)
    assert (queue.min_offset, queue.max_offset) == (0, 25)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"{0:020d}", f"{FILE_BYTES:020d}", f"{2 * FILE_BYTES:020d}"]
    raw = (tmp_path / f"{FILE_BYTES:020d}").read_bytes()
    assert ENTRY.unpack_from(raw, 0) == (1000 + 100 * 10, 100, 10)  # entry 10 opens file 2
    queue.close()


def test_duplicates_and_repeats_are_ignored(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    _fill(queue, 5)
    assert not queue.put(physical_offset=1200, size_bytes=100, tags_code=0, queue_offset=2)
    assert queue.max_offset == 5
    with pytest.raises(ConsumeQueueGapError, match="hole"):
        queue.put(physical_offset=9000, size_bytes=100, tags_code=0, queue_offset=9)
    queue.close()


def test_a_queue_starting_late_is_filled_up_to_its_first_entry(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    _fill(queue, 3, first_offset=13)
    assert (queue.min_offset, queue.max_offset) == (13, 16)
    assert queue.read(12, 1) is None
    queue.close()
    reopened = _queue(tmp_path)
    reopened.load()
    assert (reopened.min_offset, reopened.max_offset) == (13, 16)
    reopened.close()


def test_numpy_view_for_batch_scans(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    _fill(queue, 8)
    found = queue.read(2, 4)
    assert found is not None
    held, entries = found
    del found  # the only reference to the view must be `entries`
    assert entries["physical_offset"].tolist() == [1200, 1300, 1400, 1500]
    assert entries["tags_code"].tolist() == [2, 3, 4, 5]
    del entries
    held.release()
    queue.close()


def test_truncate_to_physical_drops_later_entries_and_files(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    _fill(queue, 25)
    dropped = queue.truncate_to_physical(1000 + 100 * 7)
    assert dropped == 18
    assert queue.max_offset == 7
    assert queue.max_physical_end == 1000 + 100 * 7
    assert len(queue.files) == 1
    _fill(queue, 3, first_offset=7)  # appends continue from the cut
    assert queue.max_offset == 10
    queue.close()


def test_reopen_finds_the_end_and_cuts_a_garbage_tail(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    _fill(queue, 14)
    queue.close()
    second = tmp_path / f"{FILE_BYTES:020d}"
    data = bytearray(second.read_bytes())
    data[3 * ENTRY_SIZE_BYTES + 8:3 * ENTRY_SIZE_BYTES + 12] = b"\xff\xff\xff\xff"  # size < 0
    second.write_bytes(bytes(data))
    reopened = _queue(tmp_path)
    reopened.load()
    assert reopened.max_offset == 13  # entries 10..12 stay; 13 is invalid
    assert reopened.max_physical_end == 1000 + 100 * 13
    reopened.close()


def _records(offsets: list[int]) -> list[DispatchRecord]:
    return [DispatchRecord(1000 + 100 * offset, 100, 0, offset, 0, 0, "T", {})
            for offset in offsets]


def test_put_streak_takes_what_follows_the_end_in_reserved_room(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    assert queue.put_streak(_records([0, 1]), 0, 2, None) == 0  # no file yet: `put` makes it
    _fill(queue, 3)
    records = _records([1, 2, 3, 4, 5, 7, 8])
    assert queue.put_streak(records, 0, 3, None) == 0  # a duplicate
    # 3, 4, 5; 7 would leave a hole
    assert queue.put_streak(records, 2, 7, [11, 12, -5, 6, 7]) == 3
    assert queue.put_streak(records, 5, 7, None) == 0
    codes = list(range(14))
    assert queue.put_streak(_records(list(range(6, 20))), 0, 14, codes) == 4  # the file is full
    assert (queue.max_offset, queue.max_physical_end) == (10, 1000 + 100 * 10)
    raw = (tmp_path / f"{0:020d}").read_bytes()
    assert [ENTRY.unpack_from(raw, 20 * n) for n in (2, 3, 5, 9)] == [
        (1200, 100, 2), (1300, 100, 11), (1500, 100, -5), (1900, 100, 3)]
    queue.close()
