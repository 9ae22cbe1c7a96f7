"""The `mqstore` CLI: the main job, inspect, verify, and exit code 2 for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqstore.services.cli.command import main
from mqstore.storage import Message, MessageStore
from tests.conftest import SMALL_SEGMENT_BYTES, small_config


def _store_with(store_dir: Path, count: int) -> list[int]:
    with MessageStore.open(store_dir, small_config()) as store:
        return [store.put(Message("C", i % 2, b"v" * 900, keys=(f"k{i}",))).physical_offset
                for i in range(count)]


def test_produce_writes_and_reads_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["produce", str(tmp_path / "d"), "--count", "5000", "--segment-mib", "1",
                 "--body-bytes", "300"])
    assert code == 0
    assert "wrote 5000 messages" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "d")]) == 0


def test_inspect_reports_segments_and_checkpoint(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _store_with(tmp_path, 200)
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["record_count"] == 200
    assert report["segment_size_bytes"] == SMALL_SEGMENT_BYTES
    assert report["checkpoint"]["state"] == "valid"
    assert report["abort_marker"] is False
    assert all(s["ends_with_blank"] for s in report["segments"][:2])
    queues = {(q["topic"], q["queue_id"]): q for q in report["consume_queues"]}
    assert {key: (q["min_offset"], q["max_offset"]) for key, q in queues.items()} == {
        ("C", 0): (0, 100), ("C", 1): (0, 100)}
    assert report["index"]["file_count"] >= 1
    assert report["index"]["entry_count"] == 200
    assert main(["inspect", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "records 200" in text
    assert "C/1: offsets [0, 100)" in text


def test_verify_names_the_corrupt_offsets(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    offsets = _store_with(tmp_path, 200)
    victim = offsets[150]
    segment = tmp_path / "commitlog" / f"{victim - victim % SMALL_SEGMENT_BYTES:020d}"
    with segment.open("r+b") as file:
        file.seek(victim % SMALL_SEGMENT_BYTES + 200)  # inside the body: CRC mismatch
        file.write(b"\xff\xfe")
    assert main(["verify", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert f"CORRUPT at physical offset {victim}: body CRC" in captured.out
    assert "1 damaged place(s)" in captured.err


@pytest.mark.parametrize("arguments", [
    ["verify", "/nonexistent/store"],
    ["inspect", "/"],
    ["produce", "/tmp/x", "--count", "-1"],
])
def test_bad_input_exits_2_with_a_message(arguments: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(arguments) == 2
    assert capsys.readouterr().err.startswith(f"mqstore {arguments[0]}: ")


def test_unknown_command_exits_2() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2
