"""`mqstore preallocate`: the init container's job, its idempotence and its refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqstore.services.cli.command import main
from mqstore.storage import Message, MessageStore, StoreConfig

SEGMENT_BYTES = 1 << 20


def _config(tmp_path: Path, data_dir: Path, **store: object) -> Path:
    lines = [f"data_dir: {data_dir}", "store:", f"  segment_size_bytes: {SEGMENT_BYTES}",
             "  message_body_size_bytes_max: 262144", "  put_batch_size_bytes_max: 524288"]
    lines += [f"  {key}: {value}" for key, value in store.items()]
    path = tmp_path / "mqstore.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_makes_the_first_segment_at_full_size_and_the_writer_uses_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    assert main(["preallocate", "--config", str(_config(tmp_path, data))]) == 0
    segment = data / "commitlog" / "00000000000000000000"
    assert segment.stat().st_size == SEGMENT_BYTES
    assert segment.stat().st_blocks * 512 >= SEGMENT_BYTES, "blocks allocated, not sparse"
    assert "prepared (populate)" in capsys.readouterr().out
    inode = segment.stat().st_ino
    with MessageStore.open(data, StoreConfig.for_small_segments(SEGMENT_BYTES)) as store:
        assert store.put(Message("T", 0, b"body")).ok
    assert segment.stat().st_ino == inode, "the store opened the preallocated file"


def test_a_store_with_segments_is_left_alone(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    config = _config(tmp_path, data)
    assert main(["preallocate", "--config", str(config)]) == 0
    segment = data / "commitlog" / "00000000000000000000"
    segment.write_bytes(b"x" * SEGMENT_BYTES)
    assert main(["preallocate", "--config", str(config)]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert segment.read_bytes()[:1] == b"x"
    assert sorted(os.listdir(data / "commitlog")) == ["00000000000000000000"]


def test_method_none_makes_a_sparse_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert main(["preallocate", "--config",
                 str(_config(tmp_path, data, preallocate_method="none"))]) == 0
    segment = data / "commitlog" / "00000000000000000000"
    assert segment.stat().st_size == SEGMENT_BYTES
    assert segment.stat().st_blocks == 0


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preallocate", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read the config file" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"data_dir: {tmp_path / 'data'}\nstore: {{segment_size_bytes: 1000}}\n")
    assert main(["preallocate", "--config", str(bad)]) == 2
    assert "segment_size_bytes=1000" in capsys.readouterr().err
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    assert main(["preallocate", "--config", str(_config(tmp_path, not_a_dir))]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert not (tmp_path / "data").exists(), "nothing was created for a refused config"
