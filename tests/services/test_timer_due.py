"""When a timer message is due inside its slot (services/writer/timer_due.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from mqstore.services.writer.timer_due import SLOT_SORT_UNITS_MAX, due_ms, in_due_order, unit_due_ms
from mqstore.storage import NoRecordError
from mqstore.storage.timer.timer_log import MAGIC_DEFAULT, MAGIC_ROLL, TimerUnit

SLOT_MS = 1_700_000_005_000
STORED_MS = 1_700_000_000_250


def _stored(**properties: str) -> Any:
    return SimpleNamespace(properties=properties, store_timestamp_ms=STORED_MS)


@pytest.mark.parametrize(("properties", "due"), [
    ({"TIMER_DELIVER_MS": str(SLOT_MS + 420)}, SLOT_MS + 420),
    ({"TIMER_DELAY_SEC": "5"}, STORED_MS + 5_000),
    ({"TIMER_DELAY_MS": "4900"}, STORED_MS + 4_900),
    # the first key present wins, as at the put
    ({"TIMER_DELAY_SEC": "5", "TIMER_DELIVER_MS": str(SLOT_MS + 10)}, STORED_MS + 5_000),
    # a rolled relative delay's store time is the roll's: the slot's end, as RocketMQ
    ({"TIMER_DELAY_SEC": "5", "TIMER_ROLL_TIMES": "1"}, SLOT_MS + 1000),
    ({"TIMER_DELIVER_MS": "soon"}, SLOT_MS + 1000),
    ({}, SLOT_MS + 1000),
    # never outside the slot it is filed under
    ({"TIMER_DELIVER_MS": str(SLOT_MS - 5)}, SLOT_MS),
    ({"TIMER_DELIVER_MS": str(SLOT_MS + 7_000)}, SLOT_MS + 1000),
])
def test_a_message_is_due_at_the_time_asked_within_its_slot(properties: dict[str, str],
                                                            due: int) -> None:
    assert due_ms(_stored(**properties), slot_time_ms=SLOT_MS, precision_ms=1000) == due


def test_a_slot_is_ordered_by_due_time_oldest_first_among_equals() -> None:
    dues = {10: 700, 20: 300, 30: 700, 40: 100}
    assert in_due_order([10, 20, 30, 40], dues.__getitem__, slot_end_ms=1000) == (
        [40, 20, 10, 30], [100, 300, 700, 700])


def test_a_slot_past_the_sort_bound_is_delivered_at_its_end_in_enqueue_order() -> None:
    positions = list(range(SLOT_SORT_UNITS_MAX + 1))
    order, dues = in_due_order(positions, lambda at: pytest.fail("no record is read"),
                               slot_end_ms=1000)
    assert (order, set(dues)) == (positions, {1000})


def test_a_rolled_unit_is_due_at_its_slot_and_an_unreadable_one_at_its_end() -> None:
    def unreadable(position: int) -> Any:
        raise NoRecordError(f"nothing at {position}")

    rolled = TimerUnit(-1, MAGIC_DEFAULT | MAGIC_ROLL, 0, 0, 52, 100, 0)
    plain = rolled._replace(magic=MAGIC_DEFAULT)
    assert unit_due_ms(rolled, unreadable, slot_time_ms=SLOT_MS, precision_ms=1000) == SLOT_MS
    assert unit_due_ms(plain, unreadable, slot_time_ms=SLOT_MS,
                       precision_ms=1000) == SLOT_MS + 1000
