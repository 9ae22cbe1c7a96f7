"""The reader of consume queues another process writes: listing, the written end, fillers,
the entries below a vouched position, and a last entry caught in the middle of its write."""

from __future__ import annotations

from pathlib import Path

from mqstore.storage.files.consume_queue_file import ENTRY, ENTRY_SIZE_BYTES, FILLER_SIZE
from mqstore.storage.queues.consume_queue import ConsumeQueue
from mqstore.storage.queues.reader import (
    QueueFiles,
    list_queues,
    queue_directory,
    read_next_offsets,
)

FILE_BYTES = 10 * ENTRY_SIZE_BYTES  # ten entries a file
RECORD_BYTES = 100


def _queue(store: Path, topic: str, queue_id: int) -> ConsumeQueue:
    return ConsumeQueue(queue_directory(store, (topic, queue_id)), topic=topic,
                        queue_id=queue_id, file_size_bytes=FILE_BYTES,
                        allocate_step_bytes=4096, creating_directory=store / "creating")


def _fill(queue: ConsumeQueue, offsets: range) -> None:
    for offset in offsets:
        assert queue.put(physical_offset=RECORD_BYTES * offset, size_bytes=RECORD_BYTES,
                         tags_code=0, queue_offset=offset)


def test_lists_queues_by_topic_then_id_and_skips_other_names(tmp_path: Path) -> None:
    for topic, queue_id in (("B", 0), ("A", 10), ("A", 2)):
        queue = _queue(tmp_path, topic, queue_id)
        _fill(queue, range(1))
        queue.close()
    (tmp_path / "consumequeue" / "A" / "not-a-queue").mkdir()
    assert list_queues(tmp_path) == [("A", 2), ("A", 10), ("B", 0)]
    assert list_queues(tmp_path / "nothing-here") == []


def test_written_end_and_first_real_offset_across_files(tmp_path: Path) -> None:
    queue = _queue(tmp_path, "T", 0)
    _fill(queue, range(13, 37))  # starts late: the first file opens with fillers
    queue.close()
    files = QueueFiles(queue_directory(tmp_path, ("T", 0)))
    assert files.file_size_bytes == FILE_BYTES
    assert files.first_real_offset() == 13
    assert files.written_end() == 37
    assert files.written_end(from_offset=30) == 37
    entries = files.read_entries(10, 100)
    assert len(entries) == 10, "one file at a time"
    assert (int(entries["physical_offset"][0]), int(entries["size"][0])) == (0, FILLER_SIZE)


def test_entries_below_counts_a_prefix_with_fillers(tmp_path: Path) -> None:
    queue = _queue(tmp_path, "T", 0)
    _fill(queue, range(5, 27))
    queue.close()
    files = QueueFiles(queue_directory(tmp_path, ("T", 0)))
    assert files.entries_below(0) == 5, "the fillers before offset 5 count"
    assert files.entries_below(RECORD_BYTES * 20) == 20
    assert files.entries_below(RECORD_BYTES * 20, from_offset=12) == 20
    assert files.entries_below(1 << 40) == 27
    assert read_next_offsets(tmp_path, below_physical=RECORD_BYTES * 20 + 1,
                             file_size_bytes=FILE_BYTES) == {("T", 0): 21}
    assert read_next_offsets(tmp_path, below_physical=0, file_size_bytes=FILE_BYTES) == {}


def test_a_last_entry_that_describes_no_record_is_not_trusted(tmp_path: Path) -> None:
    queue = _queue(tmp_path, "T", 0)
    _fill(queue, range(4))
    queue.close()
    directory = queue_directory(tmp_path, ("T", 0))
    # A copy caught midway (a memcpy need not go front to back): the size is there, the
    # position is not yet.
    torn = ENTRY.pack(12_345, RECORD_BYTES, 0)
    with (directory / f"{0:020d}").open("r+b") as file:
        file.seek(4 * ENTRY_SIZE_BYTES)
        file.write(torn)
    files = QueueFiles(directory)
    end = files.written_end()
    assert end == 5, "a torn entry can look written"
    checked: list[tuple[int, int, int]] = []

    def holds(physical_offset: int, size: int, queue_offset: int) -> bool:
        checked.append((physical_offset, size, queue_offset))
        return False  # the commit log has no such record there

    assert files.trusted_end(end, known_offset=3, record_matches=holds) == 4
    assert checked == [(12_345, RECORD_BYTES, 4)]
    assert files.trusted_end(end, known_offset=5, record_matches=holds) == 5, \
        "entries checked before are not checked again"
    assert files.trusted_end(end, known_offset=3, record_matches=lambda *_: True) == 5
