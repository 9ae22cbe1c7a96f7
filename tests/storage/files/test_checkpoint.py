"""The checkpoint file: RocketMQ's fields, mqstore's trailer, and who wrote it last."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from mqstore.storage import CheckpointState
from mqstore.storage.files.checkpoint import (
    CHECKPOINT_FILE_SIZE_BYTES,
    Checkpoint,
    CheckpointValues,
    encode_checkpoint,
    read_checkpoint,
)

VALUES = CheckpointValues(physic_msg_timestamp_ms=1_700_000_000_000,
                          logics_msg_timestamp_ms=1_700_000_000_100,
                          index_msg_timestamp_ms=1_700_000_000_200,
                          master_flushed_offset=123_456, confirm_physical_offset=0)


def _write(path: Path, page: bytes) -> None:
    assert len(page) == CHECKPOINT_FILE_SIZE_BYTES
    path.write_bytes(page)


def test_mqstore_reads_back_what_it_wrote(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint")
    assert checkpoint.state is CheckpointState.MISSING
    checkpoint.values = CheckpointValues(**VALUES.__dict__)
    checkpoint.write()
    checkpoint.close()
    values, state = read_checkpoint(tmp_path / "checkpoint")
    assert (values, state) == (VALUES, CheckpointState.VALID)


def test_rocketmq_layout_holds_the_fields_at_their_offsets(tmp_path: Path) -> None:
    page = encode_checkpoint(VALUES)
    assert struct.unpack_from(">qqqqq", page, 0) == (
        VALUES.physic_msg_timestamp_ms, VALUES.logics_msg_timestamp_ms,
        VALUES.index_msg_timestamp_ms, VALUES.master_flushed_offset, 0)


def test_fields_rewritten_by_rocketmq_are_trusted_not_corrupt(tmp_path: Path) -> None:
    """RocketMQ 5 rewrites bytes 0-47 (e.g. confirmPhyOffset at 32) and leaves the trailer."""
    page = bytearray(encode_checkpoint(VALUES))
    struct.pack_into(">qq", page, 24, 999_999, 888_888)
    _write(tmp_path / "checkpoint", bytes(page))
    values, state = read_checkpoint(tmp_path / "checkpoint")
    assert state is CheckpointState.FOREIGN
    assert (values.master_flushed_offset, values.confirm_physical_offset) == (999_999, 888_888)


def test_rocketmq_own_file_without_a_trailer_is_foreign(tmp_path: Path) -> None:
    page = bytearray(CHECKPOINT_FILE_SIZE_BYTES)
    struct.pack_into(">qqq", page, 0, 1, 2, 3)
    _write(tmp_path / "checkpoint", bytes(page))
    values, state = read_checkpoint(tmp_path / "checkpoint")
    assert state is CheckpointState.FOREIGN
    assert values.index_msg_timestamp_ms == 3


def test_a_damaged_trailer_is_corrupt(tmp_path: Path) -> None:
    page = bytearray(encode_checkpoint(VALUES))
    page[4040] ^= 0xFF  # inside the copy: its CRC no longer matches
    _write(tmp_path / "checkpoint", bytes(page))
    assert read_checkpoint(tmp_path / "checkpoint")[1] is CheckpointState.CORRUPT
    _write(tmp_path / "checkpoint", b"\xff" * CHECKPOINT_FILE_SIZE_BYTES)
    assert read_checkpoint(tmp_path / "checkpoint")[1] is CheckpointState.CORRUPT
    (tmp_path / "checkpoint").write_bytes(b"short")
    assert read_checkpoint(tmp_path / "checkpoint")[1] is CheckpointState.CORRUPT


def test_a_torn_page_reads_as_whole_fields(tmp_path: Path) -> None:
    """A page torn between its first and last sector: new fields with the old copy, or the
    reverse.  Either reads as a consistent set of fields (FOREIGN), never as garbage."""
    old, new = encode_checkpoint(VALUES), encode_checkpoint(
        CheckpointValues(**{**VALUES.__dict__, "master_flushed_offset": 777}))
    for torn in (new[:512] + old[512:], old[:512] + new[512:]):
        _write(tmp_path / "checkpoint", torn)
        values, state = read_checkpoint(tmp_path / "checkpoint")
        assert state is CheckpointState.FOREIGN
        assert values.master_flushed_offset in (777, VALUES.master_flushed_offset)


def test_files_of_the_previous_trailer_still_read_valid(tmp_path: Path) -> None:
    page = bytearray(CHECKPOINT_FILE_SIZE_BYTES)
    struct.pack_into(">qqqqq", page, 0, 5, 6, 7, 8, 0)
    struct.pack_into(">4sI", page, 4088, b"MQCK", zlib.crc32(page[:40]))
    _write(tmp_path / "checkpoint", bytes(page))
    values, state = read_checkpoint(tmp_path / "checkpoint")
    assert state is CheckpointState.VALID
    assert values.master_flushed_offset == 8
