"""`TimerCheckpoint` (storage/timer/timer_checkpoint.py): RocketMQ's fields, mqstore's after."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mqstore.storage.timer.timer_checkpoint import TimerCheckpoint, TimerProgress

LONGS = st.integers(min_value=0, max_value=(1 << 62))


def test_no_file_reads_as_zero(tmp_path: Path) -> None:
    assert TimerCheckpoint(tmp_path).read() == TimerProgress()


def test_rocketmqs_file_reads_its_fields_and_no_scan_position(tmp_path: Path) -> None:
    page = bytearray(4096)
    for index, value in enumerate((1_795_813_093_000, 156, 3, 3, 0, 1_795_813_093_500, 7)):
        page[index * 8:index * 8 + 8] = value.to_bytes(8, "big")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "timercheck").write_bytes(bytes(page))
    progress = TimerCheckpoint(tmp_path).read()
    assert (progress.last_read_time_ms, progress.last_timer_log_flush_position,
            progress.last_timer_queue_offset, progress.counter) == (1_795_813_093_000, 156, 3, 7)
    assert (progress.precision_ms, progress.delivery_scan_position) == (0, -1)


@given(LONGS, LONGS, LONGS, LONGS, st.integers(min_value=1, max_value=60_000),
       st.integers(min_value=-1, max_value=1 << 50))
def test_a_written_page_reads_back(read_ms: int, flush_position: int, queue_offset: int,
                                   counter: int, precision_ms: int, scan: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        checkpoint = TimerCheckpoint(Path(directory))
        progress = TimerProgress(read_ms, flush_position, queue_offset, queue_offset, 0,
                                 read_ms, counter, precision_ms, scan)
        checkpoint.write(progress)
        assert checkpoint.read() == progress
        raw = checkpoint.path.read_bytes()
        assert len(raw) == 4096
        assert int.from_bytes(raw[16:24], "big") == queue_offset
