"""`TimerWheel` (storage/timer/timer_wheel.py): RocketMQ's slot layout, a model of chains."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.storage import StoreFormatError
from mqstore.storage.timer.timer_wheel import NO_POSITION, SLOT_COUNT, Slot, TimerWheel

PRECISION_MS = 1000


def test_a_new_wheel_is_rocketmqs_size_and_empty(tmp_path: Path) -> None:
    wheel = TimerWheel.open(tmp_path, precision_ms=PRECISION_MS)
    assert (tmp_path / "timerwheel").stat().st_size == 38_707_200 == SLOT_COUNT * 32
    assert wheel.slot(1_795_813_092_000) is None
    assert wheel.last_position(1_795_813_092_000) == NO_POSITION
    wheel.close()


def test_a_slot_is_written_as_rocketmq_lays_it_out(tmp_path: Path) -> None:
    wheel = TimerWheel.open(tmp_path, precision_ms=PRECISION_MS)
    wheel.add(1_795_813_092_000, 0)
    wheel.add(1_795_813_092_000, 52)
    wheel.flush()
    wheel.close()
    index = 1_795_813_092 % SLOT_COUNT
    raw = (tmp_path / "timerwheel").read_bytes()[index * 32:index * 32 + 32]
    assert raw.hex() == ("000000006b09eee4" "0000000000000000" "0000000000000034"
                         "00000002" "00000000")  # (1795813092, 0, 52, 2, 0), as run


def test_a_slot_of_an_earlier_turn_reads_as_empty(tmp_path: Path) -> None:
    wheel = TimerWheel.open(tmp_path, precision_ms=PRECISION_MS, slot_count=10)
    wheel.add(3_000, 0)
    assert wheel.slot(13_000) is None
    assert wheel.slot(3_000) == Slot(3, 0, 0, 1)
    wheel.close()


def test_a_wheel_of_another_size_is_refused(tmp_path: Path) -> None:
    (tmp_path / "timerwheel").write_bytes(bytes(64))
    with pytest.raises(StoreFormatError, match="a wheel of 10 slots is 320"):
        TimerWheel.open(tmp_path, precision_ms=PRECISION_MS, slot_count=10)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=60))
def test_slots_match_a_model_of_chains_and_survive_reopen(tmp_path_factory: pytest.TempPathFactory,
                                                          slot_seconds: list[int]) -> None:
    directory = tmp_path_factory.mktemp("wheel")
    wheel = TimerWheel.open(directory, precision_ms=PRECISION_MS, slot_count=16)
    model: dict[int, list[int]] = {}
    for index, second in enumerate(slot_seconds):
        time_ms = 1_000_000 + second * PRECISION_MS
        position = index * 52
        assert wheel.last_position(time_ms) == (model[time_ms][-1] if time_ms in model
                                                else NO_POSITION)
        wheel.add(time_ms, position)
        # a later turn of the wheel takes the slot over, as RocketMQ's does
        for other in [t for t in model if t != time_ms and (t // 1000) % 16 ==
                      (time_ms // 1000) % 16]:
            del model[other]
        model.setdefault(time_ms, []).append(position)
    wheel.close()
    reopened = TimerWheel.open(directory, precision_ms=PRECISION_MS, slot_count=16)
    for time_ms, positions in model.items():
        assert reopened.slot(time_ms) == Slot(time_ms // 1000, positions[0], positions[-1],
                                              len(positions))
    assert reopened.count_from(0) == sum(len(positions) for positions in model.values())
    reopened.close()
