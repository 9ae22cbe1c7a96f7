"""When, inside its slot, a timer message is due: the time its producer asked for.

The wheel files a message under its slot, `TIMER_OUT_MS` (the asked time floored to
`timer_precision_ms`, services/writer/timer_puts.py), as RocketMQ 5 does; RocketMQ delivers a
slot once it has ended, so a message comes up to one precision (1 s) after the time asked.
mqstore opens a slot when it begins and delivers each of its messages at the time asked,
read back from the message itself:

| the timer topic's record carries                     | due at                              |
|------------------------------------------------------|-------------------------------------|
| `TIMER_DELAY_SEC` or `TIMER_DELAY_MS` (first present | its store time + the delay (the put |
| wins, as at the put), never rolled                   | computed the slot from the same)    |
| `TIMER_DELIVER_MS` (and neither of the above)        | that time                           |
| anything else (rolled: its store time is the roll's; | the slot's end, as RocketMQ         |
| a value that is not a number)                        |                                     |

always within [slot, slot end].  A unit parked at the roll window's end (ROLL) is due at its
slot: it only goes back into the timer topic.
"""

from __future__ import annotations

from collections.abc import Callable

from mqstore.services.writer.timer_puts import (
    PROPERTY_DELAY_MS,
    PROPERTY_DELAY_SEC,
    PROPERTY_DELIVER_MS,
    PROPERTY_ROLL_TIMES,
)
from mqstore.storage import StoreError
from mqstore.storage.format.message import StoredMessage
from mqstore.storage.timer.timer_log import TimerUnit

SLOT_SORT_UNITS_MAX = 10_000
"""A slot with more units than this is delivered at its end in enqueue order, as RocketMQ
delivers every slot: ordering it would read that many records at once on the writer's loop."""


def due_ms(stored: StoredMessage, *, slot_time_ms: int, precision_ms: int) -> int:
    """When the timer topic's record `stored`, filed under the slot at `slot_time_ms`, is due."""
    slot_end_ms = slot_time_ms + precision_ms
    properties = stored.properties
    asked_ms = None
    try:
        if PROPERTY_DELAY_SEC in properties:
            if PROPERTY_ROLL_TIMES not in properties:
                asked_ms = stored.store_timestamp_ms + int(properties[PROPERTY_DELAY_SEC]) * 1000
        elif PROPERTY_DELAY_MS in properties:
            if PROPERTY_ROLL_TIMES not in properties:
                asked_ms = stored.store_timestamp_ms + int(properties[PROPERTY_DELAY_MS])
        elif PROPERTY_DELIVER_MS in properties:
            asked_ms = int(properties[PROPERTY_DELIVER_MS])
    except ValueError:
        asked_ms = None
    if asked_ms is None:
        return slot_end_ms
    return min(max(asked_ms, slot_time_ms), slot_end_ms)


def in_due_order(positions: list[int], due_of: Callable[[int], int], *, slot_end_ms: int
                 ) -> tuple[list[int], list[int]]:
    """A slot's unit positions (oldest first) in the order they are due, and when each is;
    past `SLOT_SORT_UNITS_MAX` units, all at the slot's end, oldest first."""
    if len(positions) > SLOT_SORT_UNITS_MAX:
        return positions, [slot_end_ms] * len(positions)
    dues = [due_of(position) for position in positions]
    order = sorted(range(len(positions)), key=dues.__getitem__)  # stable: oldest first
    return [positions[i] for i in order], [dues[i] for i in order]


def unit_due_ms(unit: TimerUnit, message_at: Callable[[int], StoredMessage], *,
                slot_time_ms: int, precision_ms: int) -> int:
    """When a wheel unit of the slot at `slot_time_ms` is due; its record read through
    `message_at` (one that cannot be read is due at the slot's end, skipped then)."""
    if unit.rolled:
        return slot_time_ms
    try:
        stored = message_at(unit.commitlog_position)
    except StoreError:
        return slot_time_ms + precision_ms
    return due_ms(stored, slot_time_ms=slot_time_ms, precision_ms=precision_ms)
