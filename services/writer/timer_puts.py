"""Where a produce asking for a delivery time is stored: `rmq_sys_wheel_timer`, to wait.

RocketMQ 5's put hook for timer messages (`HookUtils#checkIfTimerMessage`,
`#transformTimerMessage`), applied after the delay-level rewrite (delayed_puts.py) to every
single produce that passed its checks.  A client asks with one of three properties, the
first present winning: `TIMER_DELAY_SEC` (now + s, Java `Message#setDelayTimeSec`),
`TIMER_DELAY_MS` (now + ms, `#setDelayTimeMs`), `TIMER_DELIVER_MS` (absolute ms,
`#setDeliverTimeMs`):

| the message                                             | stored as                      |
|---------------------------------------------------------|--------------------------------|
| none of the three, or `TIMER_OUT_MS` present (a copy    | itself                         |
| the timer schedule puts back), or in the timer topic,   |                                |
| or a transaction half message or rollback, or a batch   |                                |
| a value that is not a whole number                      | refused: MESSAGE_ILLEGAL       |
| due more than `timer_max_delay_s` from now              | refused: MESSAGE_ILLEGAL, with |
|                                                         | RocketMQ's remark              |
| due now or earlier                                      | itself, delivered at once (its |
|                                                         | TIMER_* key kept)              |
| due later                                               | topic `rmq_sys_wheel_timer`,   |
|                                                         | queue 0; `TIMER_OUT_MS` = the  |
|                                                         | due time floored to            |
|                                                         | `timer_precision_ms` (an exact |
|                                                         | multiple one precision         |
|                                                         | earlier); `REAL_TOPIC`,        |
|                                                         | `REAL_QID` its own             |

A message asking for a delay level too never gets here: delayed_puts.py drops its TIMER_*
keys.  A batch is stored as it is: RocketMQ's hook reads a batch's own properties, not its
messages'.  `TIMER_DEL_UNIQKEY` (a recall's delete marker) is not served: such a message is
refused.  The answer names the queue the producer asked for and the offset in the timer
topic's queue, as RocketMQ answers; the `recallHandle` header is not sent.
"""

from __future__ import annotations

import time

from mqstore.storage import Message
from mqstore.storage.format.delay_levels import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from mqstore.storage.format.properties import decode_properties, encode_properties

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_QUEUE_ID = 0
PROPERTY_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_DELIVER_MS = "TIMER_DELIVER_MS"
CLIENT_KEYS = (PROPERTY_DELAY_SEC, PROPERTY_DELAY_MS, PROPERTY_DELIVER_MS)
"""In RocketMQ's order of precedence."""
PROPERTY_OUT_MS = "TIMER_OUT_MS"
PROPERTY_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_ROLL_TIMES = "TIMER_ROLL_TIMES"
PROPERTY_DELETE_KEY = "TIMER_DEL_UNIQKEY"
TRANSACTION_BITS = 0xC
TIMED_TRANSACTION_VALUES = (0, 0x8)
_MARK = b"TIMER_"


class TimerIllegal(ValueError):
    """A timer message RocketMQ refuses (MESSAGE_ILLEGAL); the text is its remark."""


def illegal_remark(max_delay_s: int) -> str:
    return (f"timer message illegal, the delay time should not be bigger than the max delay "
            f"{max_delay_s * 1000}ms; or if set del msg, the delay time should be bigger than "
            f"the current time")


def floor_to_precision(deliver_ms: int, precision_ms: int) -> int:
    """RocketMQ's rounding: down to the precision, an exact multiple one precision down."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


class TimerRules:
    def __init__(self, *, precision_ms: int, max_delay_s: int) -> None:
        assert precision_ms > 0
        assert max_delay_s > 0
        self.precision_ms = precision_ms
        self.max_delay_s = max_delay_s

    def timed(self, messages: list[Message], *, batch: bool,
              now_ms: int | None = None) -> list[Message]:
        """`messages` as they are stored: each asking for a later delivery moved to the
        timer topic.  `TimerIllegal` for one RocketMQ refuses."""
        if batch:
            return messages
        rewritten = None
        for index, message in enumerate(messages):
            properties = _timer_properties(message)
            if properties is None:
                continue
            now = int(time.time() * 1000) if now_ms is None else now_ms
            moved = self._moved(message, properties, now)
            if moved is not None:
                if rewritten is None:
                    rewritten = list(messages)
                rewritten[index] = moved
        return messages if rewritten is None else rewritten

    def _moved(self, message: Message, properties: dict[str, str],
               now_ms: int) -> Message | None:
        deliver_ms = self.deliver_ms(properties, now_ms)
        if deliver_ms <= now_ms and PROPERTY_DELETE_KEY not in properties:
            return None
        if deliver_ms - now_ms > self.max_delay_s * 1000 or PROPERTY_DELETE_KEY in properties:
            raise TimerIllegal(illegal_remark(self.max_delay_s))
        properties[PROPERTY_OUT_MS] = str(floor_to_precision(deliver_ms, self.precision_ms))
        properties[PROPERTY_REAL_TOPIC] = message.topic
        properties[PROPERTY_REAL_QUEUE_ID] = str(message.queue_id)
        if message.properties_encoded is not None:
            return Message(TIMER_TOPIC, TIMER_QUEUE_ID, message.body, flag=message.flag,
                           born_host=message.born_host,
                           born_timestamp_ms=message.born_timestamp_ms,
                           sysflag=message.sysflag, reconsume_times=message.reconsume_times,
                           properties_encoded=encode_properties(properties))
        return Message(TIMER_TOPIC, TIMER_QUEUE_ID, message.body, tags=message.tags,
                       keys=message.keys, properties=properties, flag=message.flag,
                       born_host=message.born_host,
                       born_timestamp_ms=message.born_timestamp_ms, sysflag=message.sysflag,
                       reconsume_times=message.reconsume_times)

    def deliver_ms(self, properties: dict[str, str], now_ms: int) -> int:
        """When the message asks to be delivered (the first key present wins)."""
        for key in CLIENT_KEYS:
            text = properties.get(key)
            if text is None:
                continue
            try:
                value = int(text)
            except ValueError:
                raise TimerIllegal(illegal_remark(self.max_delay_s)) from None
            if key == PROPERTY_DELAY_SEC:
                return now_ms + value * 1000
            return now_ms + value if key == PROPERTY_DELAY_MS else value
        raise AssertionError("called only for a message holding a timer key")


def _timer_properties(message: Message) -> dict[str, str] | None:
    """The properties of a message the hook applies to, else None (cheaply, for most)."""
    if message.topic == TIMER_TOPIC or \
            message.sysflag & TRANSACTION_BITS not in TIMED_TRANSACTION_VALUES:
        return None
    if message.properties_encoded is not None:
        if _MARK not in message.properties_encoded:
            return None
        properties = decode_properties(message.properties_encoded)
        if PROPERTY_OUT_MS in properties or not any(key in properties for key in CLIENT_KEYS):
            return None
        return properties
    held = message.properties or {}
    if PROPERTY_OUT_MS in held or not any(key in held for key in CLIENT_KEYS):
        return None
    return dict(held)
