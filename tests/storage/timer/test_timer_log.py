"""`TimerLog` (storage/timer/timer_log.py): 52-byte units, blank file ends, recovery."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.storage.timer.timer_log import (
    MAGIC_DEFAULT,
    MAGIC_ROLL,
    TimerLog,
    TimerUnit,
)

FILE_SIZE_BYTES = 220
"""Three units: at 156, 52 + 16 more bytes do not fit, so a blank record of 64 ends it."""


def _unit(index: int, *, prev: int = -1, magic: int = MAGIC_DEFAULT) -> TimerUnit:
    return TimerUnit(prev, magic, 1_795_813_089_000, 3000, 0x2E16 + index, 0x159, -1809306799)


def test_a_unit_is_written_as_rocketmq_lays_it_out(tmp_path: Path) -> None:
    log = TimerLog.open(tmp_path, file_size_bytes=1 << 20)
    topic_hash = 0x94282B51 - (1 << 32)
    assert log.append(TimerUnit(-1, 1, 0x1A21ECD1EE8, 0xBB8, 0x2E16, 0x159, topic_hash)) == 0
    log.flush()
    log.close()
    raw = (tmp_path / "timerlog" / "00000000000000000000").read_bytes()[:52]
    assert raw.hex() == ("00000034" "ffffffffffffffff" "00000001" "000001a21ecd1ee8"
                         "00000bb8" "0000000000002e16" "00000159" "94282b51"
                         "0000000000000000")  # the first unit of the run


def test_a_file_ends_with_a_blank_record_and_the_next_unit_opens_the_next(
        tmp_path: Path) -> None:
    log = TimerLog.open(tmp_path, file_size_bytes=FILE_SIZE_BYTES)
    positions = [log.append(_unit(index)) for index in range(5)]
    assert positions == [0, 52, 104, FILE_SIZE_BYTES, FILE_SIZE_BYTES + 52]
    first = (tmp_path / "timerlog" / "00000000000000000000").read_bytes()
    assert first[156:172].hex() == "00000040" "0000000000000000" "cbd43194"
    log.close()
    reopened = TimerLog.open(tmp_path, file_size_bytes=FILE_SIZE_BYTES)
    found = reopened.recover(0)
    assert [position for position, _ in found] == positions
    assert [unit for _, unit in found] == [_unit(index) for index in range(5)]
    assert reopened.end_position == FILE_SIZE_BYTES + 104
    reopened.close()


def test_recovery_drops_a_torn_unit_and_zeroes_the_tail(tmp_path: Path) -> None:
    log = TimerLog.open(tmp_path, file_size_bytes=1 << 16)
    for index in range(3):
        log.append(_unit(index, magic=MAGIC_DEFAULT | MAGIC_ROLL))
    log.close()
    path = tmp_path / "timerlog" / "00000000000000000000"
    data = bytearray(path.read_bytes())
    data[104 + 12:104 + 16] = (0x10).to_bytes(4, "big")  # a magic no unit has
    path.write_bytes(bytes(data))
    reopened = TimerLog.open(tmp_path, file_size_bytes=1 << 16)
    assert len(reopened.recover(0)) == 2
    assert reopened.end_position == 104
    assert path.read_bytes()[104:] == bytes((1 << 16) - 104)
    assert reopened.unit(52).rolled
    reopened.close()


@settings(max_examples=40, deadline=None)
@given(count=st.integers(min_value=0, max_value=20), cut=st.integers(min_value=0, max_value=60))
def test_append_then_recover_from_any_flush_point_finds_the_same_units(
        tmp_path_factory: pytest.TempPathFactory, count: int, cut: int) -> None:
    directory = tmp_path_factory.mktemp("log")
    log = TimerLog.open(directory, file_size_bytes=FILE_SIZE_BYTES)
    written = [(log.append(_unit(index)), _unit(index)) for index in range(count)]
    end = log.end_position
    log.close()
    reopened = TimerLog.open(directory, file_size_bytes=FILE_SIZE_BYTES)
    flush_position = written[min(cut, count - 1)][0] if written else 0
    found = reopened.recover(flush_position)
    assert found == [pair for pair in written if pair[0] >= found[0][0]] if found else not written
    assert reopened.end_position == (end if written else 0)
    for position, unit in written:
        assert reopened.unit(position) == unit
    reopened.close()
