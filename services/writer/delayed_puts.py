"""Where a produce asking for a delay level is stored: `SCHEDULE_TOPIC_XXXX`, to wait.

RocketMQ's put hook (`HookUtils#handleScheduleMessage`), applied by the writer to every
produce that passed its checks, on both fronts (HTTP: a message property `DELAY`; remoting:
`Message#setDelayTimeLevel`):

| the message                                        | stored as                              |
|----------------------------------------------------|----------------------------------------|
| `DELAY` absent, 0 or less, or not a number         | itself                                 |
| `DELAY` = n > 0, not a transaction half message or | topic `SCHEDULE_TOPIC_XXXX`, queue     |
| rollback (sysflag transaction bits 0 or 0x8)       | min(n, levels) - 1; `DELAY` clamped;   |
|                                                    | `REAL_TOPIC`, `REAL_QID` its own       |
| a batch (of any size) in which any asks for a     | refused: MESSAGE_ILLEGAL, as RocketMQ  |
| delay                                              | (its clients refuse it before sending) |

A message asking for a level and a delivery time too (timer_puts.py) stays a delay-level
message and loses its `TIMER_DELIVER_MS`, `TIMER_DELAY_SEC` and `TIMER_DELAY_MS`, as in
RocketMQ.

The indexer stamps the schedule entry with its due time (storage/dispatch/dispatcher.py)
and the writer's schedule puts it back into its own topic and queue when it is due
(delay_schedule.py), which stores it without this rewrite.  A producer's answer names the
queue it asked for and the offset in the schedule queue, as RocketMQ answers.
"""

from __future__ import annotations

from mqstore.services.writer.timer_puts import CLIENT_KEYS as TIMER_KEYS
from mqstore.storage import Message
from mqstore.storage.format.delay_levels import (
    DELAY_PAIR,
    PROPERTY_DELAY,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    SCHEDULE_TOPIC,
    DelayLevels,
    delay_level,
)
from mqstore.storage.format.properties import decode_properties, encode_properties

TRANSACTION_BITS = 0xC
SCHEDULED_TRANSACTION_VALUES = (0, 0x8)
"""Not a transaction message, or a committed one: only those wait (a half message waits
for its commit, a rollback is never delivered)."""


class DelayedBatchError(ValueError):
    """A batch asks for a delay: RocketMQ refuses it (MESSAGE_ILLEGAL)."""


def requested_level(message: Message) -> int:
    """The delay level `message` asks for (0: none)."""
    if message.properties_encoded is not None:
        return delay_level(message.properties_encoded)
    value = (message.properties or {}).get(PROPERTY_DELAY, "0")
    try:
        return int(value)
    except ValueError:
        return 0


def scheduled(messages: list[Message], levels: DelayLevels, *, batch: bool) -> list[Message]:
    """`messages` (one request's; `batch`: a batch request) as they are stored: each asking
    for a delay moved to the schedule topic.  `DelayedBatchError` if a batch asks for one."""
    rewritten = None
    for index, message in enumerate(messages):
        encoded = message.properties_encoded
        if encoded is not None and DELAY_PAIR not in encoded:
            continue  # a client's message without a delay: one search, no call
        level = requested_level(message)
        if level <= 0 or message.sysflag & TRANSACTION_BITS not in SCHEDULED_TRANSACTION_VALUES:
            continue
        if batch:
            raise DelayedBatchError(f"messages[{index}] asks for delay level {level}: a batch "
                                    f"cannot hold delayed messages (send them one by one)")
        if rewritten is None:
            rewritten = list(messages)
        rewritten[index] = _to_schedule(message, levels.clamp(level))
    return messages if rewritten is None else rewritten


def _to_schedule(message: Message, level: int) -> Message:
    moved = {PROPERTY_DELAY: str(level), PROPERTY_REAL_TOPIC: message.topic,
             PROPERTY_REAL_QUEUE_ID: str(message.queue_id)}
    if message.properties_encoded is not None:
        properties = decode_properties(message.properties_encoded)
        for key in TIMER_KEYS:
            properties.pop(key, None)
        properties.update(moved)
        return Message(SCHEDULE_TOPIC, level - 1, message.body, flag=message.flag,
                       born_host=message.born_host,
                       born_timestamp_ms=message.born_timestamp_ms, sysflag=message.sysflag,
                       reconsume_times=message.reconsume_times,
                       properties_encoded=encode_properties(properties))
    return Message(SCHEDULE_TOPIC, level - 1, message.body, tags=message.tags,
                   keys=message.keys, properties={
                       **{key: value for key, value in (message.properties or {}).items()
                          if key not in TIMER_KEYS}, **moved},
                   flag=message.flag, born_host=message.born_host,
                   born_timestamp_ms=message.born_timestamp_ms, sysflag=message.sysflag,
                   reconsume_times=message.reconsume_times)
