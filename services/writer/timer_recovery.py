"""What the timer schedule knows at start: the timer store's files made whole again, and the
copies a crash may have left delivered but not yet counted.

The decision table, from config/timercheck (storage/timer/timer_checkpoint.py) and the files:

| case                                          | action                                     |
|-----------------------------------------------|--------------------------------------------|
| no timercheck                                 | a new store: enqueue from the timer queue's |
|                                               | first entry, read from now                 |
| timerlog units past the checkpoint's flush    | kept (scanned from the flush position less |
| position (a crash after they were written)    | one file, as RocketMQ), each chained into  |
|                                               | its slot unless the wheel already has it   |
| a torn or zeroed unit                         | the timerlog ends before it; the tail is   |
|                                               | zeroed, later files removed                |
| the last unit's record is at queue offset q   | enqueue from max(checkpoint offset, q + 1):|
|                                               | entries already in the wheel are not       |
|                                               | enqueued twice                             |
| read time older than the wheel's reach        | read from now - (604,800 - 60) slots       |
| `delivery_scan_position` known (mqstore's     | every record from it to the log's end that |
| file)                                         | carries TIMER_DEQUEUE_MS is a copy already |
|                                               | delivered: counted by identity, and the    |
|                                               | dequeue skips that many units of the same  |
|                                               | identity instead of delivering them again  |
| no timercheck, but timerlog units             | from the first unit's record on            |
| RocketMQ's file (no scan position)            | no copy is counted: what RocketMQ delivered|
|                                               | since its last checkpoint comes again, as  |
|                                               | RocketMQ itself would deliver it           |

A copy's identity is (topic, queue id, born time, UNIQ_KEY, TIMER_OUT_MS, TIMER_ROLL_TIMES):
what a unit's delivery would write, and shared only by a producer's own resends of one
message.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Mapping

from mqstore.services.writer.timer_puts import (
    PROPERTY_DEQUEUE_MS,
    PROPERTY_OUT_MS,
    PROPERTY_ROLL_TIMES,
)
from mqstore.storage import MessageStore, NoRecordError, StoreError
from mqstore.storage.format.properties import PROPERTY_UNIQUE_KEY
from mqstore.storage.timer.timer_checkpoint import TimerProgress
from mqstore.storage.timer.timer_log import TimerLog, TimerUnit
from mqstore.storage.timer.timer_wheel import SLOTS_TOTAL, TimerWheel

log = logging.getLogger("mqstore.writer.timers")

Identity = tuple[str, int, int, str, str, str]
READ_TIME_MARGIN_SLOTS = 60
"""RocketMQ reads at most `slotsTotal` - 60 slots back after a long stop."""


@dataclasses.dataclass
class Recovered:
    queue_offset: int
    read_time_ms: int
    delivered: collections.Counter[Identity]
    units_revised: int


def identity(topic: str, queue_id: int, born_timestamp_ms: int,
             properties: Mapping[str, str]) -> Identity:
    return (topic, queue_id, born_timestamp_ms, properties.get(PROPERTY_UNIQUE_KEY, ""),
            properties.get(PROPERTY_OUT_MS, ""), properties.get(PROPERTY_ROLL_TIMES, "0"))


def recover(store: MessageStore, wheel: TimerWheel, timer_log: TimerLog,
            progress: TimerProgress, *, now_ms: int) -> Recovered:
    precision_ms = wheel.precision_ms
    found = timer_log.recover(progress.last_timer_log_flush_position)
    revised = sum(_revise(wheel, timer_log, position, unit) for position, unit in found)
    queue_offset = progress.last_timer_queue_offset
    if found:
        try:
            last = store.message_at(found[-1][1].commitlog_position)
            queue_offset = max(queue_offset, last.queue_offset + 1)
        except StoreError:
            log.warning("the last timerlog unit's record is gone; enqueueing from the "
                        "checkpoint's queue offset %d", queue_offset)
    oldest_ms = (now_ms - (SLOTS_TOTAL - READ_TIME_MARGIN_SLOTS) * precision_ms)
    read_time_ms = progress.last_read_time_ms or now_ms
    read_time_ms = max(read_time_ms, oldest_ms) // precision_ms * precision_ms
    delivered: collections.Counter[Identity] = collections.Counter()
    scan_position = progress.delivery_scan_position
    if scan_position < 0 and progress == TimerProgress() and found:
        scan_position = found[0][1].commitlog_position  # a first checkpoint never written
    if scan_position >= 0:
        delivered = _delivered_since(store, scan_position)
    log.info("timer store recovered: %d units found past the last flush (%d chained again), "
             "enqueue from offset %d, read from %d, %d copies already delivered",
             len(found), revised, queue_offset, read_time_ms, sum(delivered.values()))
    return Recovered(queue_offset, read_time_ms, delivered, revised)


def _revise(wheel: TimerWheel, timer_log: TimerLog, position: int, unit: TimerUnit) -> int:
    """Chain a recovered unit into its slot unless it is there already; 1 if it was not."""
    slot_time_ms = unit.slot_time_ms
    held = wheel.slot(slot_time_ms)
    if held is not None and held.last_position >= position:
        return 0
    if held is not None and held.last_position == unit.prev_position:
        wheel.put_slot(slot_time_ms, first_position=held.first_position,
                       last_position=position, unit_count=held.unit_count + 1)
        return 1
    first, count, previous = position, 1, unit.prev_position
    while previous >= 0:
        assert previous < first, "a slot's chain runs back through the log"
        first, count = previous, count + 1
        previous = timer_log.unit(previous).prev_position
    wheel.put_slot(slot_time_ms, first_position=first, last_position=position, unit_count=count)
    return 1


def _delivered_since(store: MessageStore, position: int) -> collections.Counter[Identity]:
    counted: collections.Counter[Identity] = collections.Counter()
    try:
        for message in store.iter_messages(max(position, store.min_position)):
            if PROPERTY_DEQUEUE_MS in message.properties:
                counted[identity(message.topic, message.queue_id, message.born_timestamp_ms,
                                 message.properties)] += 1
    except NoRecordError:
        log.warning("the commit log holds no record at %d: no delivered copy counted",
                    position)
    return counted
