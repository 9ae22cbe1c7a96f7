"""The double-slot watermark files: never a torn or mixed read, newest complete publish wins."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mqstore.storage.errors import StoreFormatError
from mqstore.storage.files.watermarks import SLOT_SIZE_BYTES, PositionsFile

FIELDS = PositionsFile.FIELDS


def _values(n: int) -> dict[str, int]:
    return {name: n for name in FIELDS}


def test_round_trip_and_reader_in_another_open(tmp_path: Path) -> None:
    writer = PositionsFile(tmp_path / "positions", writable=True)
    assert writer.read() is None
    for n in range(1, 6):
        assert writer.publish(**_values(n)) == n
    reader = PositionsFile(tmp_path / "positions", writable=False)
    assert reader.read() == (5, _values(5))
    writer.close()
    reopened = PositionsFile(tmp_path / "positions", writable=True)
    assert reopened.publish(**_values(6)) == 6  # the sequence continues across opens
    assert reader.read() == (6, _values(6))


def test_torn_newest_slot_falls_back_to_the_previous_publish(tmp_path: Path) -> None:
    writer = PositionsFile(tmp_path / "positions", writable=True)
    writer.publish(**_values(1))
    writer.publish(**_values(2))  # slot 0 (sequence 2 % 2)
    with open(tmp_path / "positions", "r+b") as raw:
        raw.seek(40)  # inside slot 0's fields
        raw.write(b"\xff" * 8)
    assert PositionsFile(tmp_path / "positions", writable=False).read() == (1, _values(1))


def test_trailing_sequence_must_match(tmp_path: Path) -> None:
    writer = PositionsFile(tmp_path / "positions", writable=True)
    writer.publish(**_values(1))
    writer.publish(**_values(2))
    with open(tmp_path / "positions", "r+b") as raw:  # a publish stopped before its last store
        raw.seek(116)
        raw.write((1).to_bytes(8, "big"))
    assert PositionsFile(tmp_path / "positions", writable=False).read() == (1, _values(1))


def test_foreign_file_is_an_error_not_a_value(tmp_path: Path) -> None:
    path = tmp_path / "positions"
    path.write_bytes(b"\x01" * 4096)
    with pytest.raises(StoreFormatError, match="no complete slot"):
        PositionsFile(path, writable=False)
    (tmp_path / "short").write_bytes(b"\x00" * SLOT_SIZE_BYTES)
    with pytest.raises(StoreFormatError, match="4096"):
        PositionsFile(tmp_path / "short", writable=False)


def test_concurrent_reads_never_see_a_mix(tmp_path: Path) -> None:
    writer = PositionsFile(tmp_path / "positions", writable=True)
    writer.publish(**_values(1))
    reader = PositionsFile(tmp_path / "positions", writable=False)
    done = threading.Event()
    seen: list[int] = []

    def read_loop() -> None:
        while not done.is_set():
            found = reader.read()
            assert found is not None
            sequence, values = found
            assert set(values.values()) == {sequence}, values  # every field from one publish
            seen.append(sequence)

    thread = threading.Thread(target=read_loop)
    thread.start()
    for n in range(2, 20_000):
        writer.publish(**_values(n))
    done.set()
    thread.join()
    assert seen == sorted(seen)
    assert len(seen) > 10
