"""Consume queue files are full length but sparse: blocks are reserved a step at a time,
ahead of the entries, so a full disk is an OSError before a write and never a SIGBUS."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from mqstore.storage.files import consume_queue_file
from mqstore.storage.files.consume_queue_file import ENTRY_SIZE_BYTES
from mqstore.storage.queues.consume_queue import ConsumeQueue

FILE_BYTES = 6_000_000  # RocketMQ's size: what a new queue cost in full before
STEP_BYTES = 64 * 1024
BLOCK_BYTES = 512  # st_blocks counts 512-byte units


def _queue(directory: Path) -> ConsumeQueue:
    return ConsumeQueue(directory / "T" / "0", topic="T", queue_id=0,
                        file_size_bytes=FILE_BYTES, allocate_step_bytes=STEP_BYTES,
                        creating_directory=directory / "creating")


def _allocated_bytes(path: Path) -> int:
    return os.stat(path).st_blocks * BLOCK_BYTES


def _put(queue: ConsumeQueue, offset: int) -> bool:
    return queue.put(physical_offset=100 * offset, size_bytes=100, tags_code=0,
                     queue_offset=offset)


def test_a_new_queue_file_has_its_full_length_and_one_step_of_blocks(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    assert _put(queue, 0)
    path = queue.files[0].path
    assert path.stat().st_size == FILE_BYTES  # RocketMQ loads only files of this length
    assert 0 < _allocated_bytes(path) <= STEP_BYTES
    queue.close()


def test_blocks_grow_a_step_at_a_time_as_entries_reach_them(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    per_step = STEP_BYTES // ENTRY_SIZE_BYTES
    for offset in range(per_step + 1):  # one entry past the first step
        assert _put(queue, offset)
    path = queue.files[0].path
    assert STEP_BYTES < _allocated_bytes(path) <= 2 * STEP_BYTES + 4096
    queue.close()


def test_a_reopened_queue_reserves_before_it_writes(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    assert _put(queue, 0)
    queue.close()
    reopened = _queue(tmp_path)
    reopened.load()
    assert reopened.max_offset == 1
    assert reopened.files[0].allocated_position == 0  # nothing known after a reopen
    assert _put(reopened, 1)
    assert reopened.files[0].allocated_position >= STEP_BYTES
    assert _allocated_bytes(reopened.files[0].path) <= 2 * STEP_BYTES
    reopened.close()


def test_a_full_disk_is_an_oserror_and_writes_nothing(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    queue = _queue(tmp_path)
    per_step = STEP_BYTES // ENTRY_SIZE_BYTES
    for offset in range(per_step):
        assert _put(queue, offset)

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(consume_queue_file.os, "posix_fallocate", no_space)
    with pytest.raises(OSError) as raised:
        _put(queue, per_step)
    assert raised.value.errno == errno.ENOSPC
    assert queue.max_offset == per_step  # the entry was not written
    monkeypatch.undo()  # the disk has room again: dispatch retries the same entry
    assert _put(queue, per_step)
    assert queue.max_offset == per_step + 1
    queue.close()
