"""One segment: naming, positions, reference counting, truncation."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.storage import FlushMode, PreallocateMethod, StoreFormatError
from mqstore.storage.files.segment import CommitLogSegment
from mqstore.storage.format.volume import offset_file_name, parse_offset_file_name
from tests.conftest import small_config

SIZE = 64 * 1024


def _creating(directory: Path, start: int) -> Path:
    """Where a segment is prepared: a directory of its own beside the segments."""
    (directory.parent / "creating").mkdir(exist_ok=True)
    return directory.parent / "creating" / f"commitlog.{start:020d}"


def _segment(directory: Path, start: int = 0) -> CommitLogSegment:
    return CommitLogSegment.create(directory, creating=_creating(directory, start),
                                   start_position=start, size_bytes=SIZE,
                                   method=PreallocateMethod.ZERO_FILL, warmup=False)


def test_names_are_twenty_digit_start_positions() -> None:
    assert offset_file_name(1 << 30) == "00000000001073741824"
    assert parse_offset_file_name("00000000001073741824") == 1 << 30
    assert parse_offset_file_name("0000000000107374182") is None
    assert parse_offset_file_name("0000000000107374182x") is None


CONCRETE_METHODS = [m for m in PreallocateMethod if m is not PreallocateMethod.AUTO]


@pytest.mark.parametrize("method", CONCRETE_METHODS)
@pytest.mark.parametrize("warmup", [False, True])
def test_create_gives_a_full_size_zeroed_file(tmp_path: Path, method: PreallocateMethod,
                                              warmup: bool) -> None:
    directory = tmp_path / "commitlog"
    directory.mkdir()
    segment = CommitLogSegment.create(directory, creating=_creating(directory, SIZE),
                                      start_position=SIZE, size_bytes=SIZE, method=method,
                                      warmup=warmup)
    assert segment.path.name == offset_file_name(SIZE)
    assert segment.path.stat().st_size == SIZE
    assert not any(segment.mapping[:])
    assert list(directory.iterdir()) == [segment.path]  # nothing else beside it
    assert not any((tmp_path / "creating").iterdir()), "the prepared file was renamed"
    segment.close()


def test_a_held_segment_is_neither_unmapped_nor_deleted(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    segment.mapping[0:5] = b"hello"
    assert segment.hold()
    segment.close(delete=True)
    assert not segment.hold(), "a closing segment accepts no new readers"
    assert not segment.is_closed
    assert segment.path.exists()
    assert segment.mapping[0:5] == b"hello"
    segment.release()
    assert segment.is_closed
    assert not segment.path.exists()


def test_release_more_than_held_is_a_bug(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    segment.close()
    with pytest.raises(AssertionError):
        segment.release()


def test_truncate_zeroes_the_tail(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    segment.mapping[100:200] = b"x" * 100
    segment.mapping[SIZE - 10:SIZE] = b"y" * 10
    segment.written_position = 200
    segment.truncate(150)
    assert segment.written_position == segment.committed_position == 150
    assert segment.mapping[100:150] == b"x" * 50
    assert not any(segment.mapping[150:])
    segment.close()


def test_reopen_refuses_a_wrong_size(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    segment.close()
    with pytest.raises(StoreFormatError, match="segment_size_bytes is 4096"):
        CommitLogSegment.open_existing(segment.path, size_bytes=4096)


def test_auto_preallocation_follows_the_write_path() -> None:
    assert small_config().effective_preallocate_method is PreallocateMethod.POPULATE
    assert small_config(pool_enabled=True).effective_preallocate_method \
        is PreallocateMethod.FALLOCATE
    assert small_config(pool_enabled=True, flush_mode=FlushMode.SYNC
                        ).effective_preallocate_method is PreallocateMethod.POPULATE
    assert small_config(preallocate_method=PreallocateMethod.NONE
                        ).effective_preallocate_method is PreallocateMethod.NONE
