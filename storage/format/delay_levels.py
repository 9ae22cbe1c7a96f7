"""RocketMQ's delay levels: the table, and where a delayed message waits.

A producer asks for a delay by level (`Message#setDelayTimeLevel`: the `DELAY` property, 1..
the table's length; 0 or less is no delay).  The broker stores such a message in the topic
`SCHEDULE_TOPIC_XXXX`, queue level - 1, with its own topic and queue in the properties
`REAL_TOPIC` and `REAL_QID`, and its consume queue entry's tags code is the time it is due
(store time + the level's delay) rather than a tag hash.  A level past the table is clamped
to its last level, as RocketMQ clamps it.

The table is RocketMQ's `messageDelayLevel` string (`store.message_delay_levels`): delays
separated by single spaces, each a decimal count and one unit letter, `s` seconds, `m`
minutes, `h` hours, `d` days; item i (from 0) is level i + 1.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ConfigError
from .properties import decode_properties

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
SCHEDULE_QUEUE_COUNT = 18
"""RocketMQ's `SCHEDULE_TOPIC_QUEUE_NUM`: the topic's queue count in routes and topic
configs, whatever the table's length (queues past it are made as levels need them)."""
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
UNKNOWN_LEVEL_DELAY_MS = 1000
"""RocketMQ's due time for a schedule record whose level the table does not hold."""

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
DELAY_PAIR = b"DELAY\x01"
"""What encoded properties hold when they may ask for a delay (one search rules most out)."""


class DelayLevels:
    """Use `DelayLevels.parse(text)`: `delay_ms(level)` of each level 1..`max_level`."""

    def __init__(self, delays_ms: tuple[int, ...]) -> None:
        assert delays_ms, "a table holds at least one level"
        self.delays_ms = delays_ms

    @classmethod
    def parse(cls, text: str, *, setting: str = "message_delay_levels") -> DelayLevels:
        """The table of a `messageDelayLevel` string; `ConfigError` naming `setting` if it is
        not one."""
        if not isinstance(text, str) or not text:
            raise ConfigError(f"{setting}={text!r} must name at least one delay, as "
                              f"RocketMQ's messageDelayLevel: {DEFAULT_DELAY_LEVELS!r}")
        delays = []
        for item in text.split(" "):
            count, unit = item[:-1], item[-1:]
            if unit not in _UNIT_MS or not count.isdigit() or not count.isascii():
                raise ConfigError(f"{setting}={text!r}: {item!r} is not a count and a unit "
                                  f"(s, m, h or d), as in {DEFAULT_DELAY_LEVELS!r}; delays "
                                  f"are separated by single spaces")
            delays.append(int(count) * _UNIT_MS[unit])
        return cls(tuple(delays))

    @property
    def max_level(self) -> int:
        return len(self.delays_ms)

    def clamp(self, level: int) -> int:
        """A requested level (> 0) as the broker stores it: past the table, its last."""
        assert level > 0
        return min(level, self.max_level)

    def delay_ms(self, level: int) -> int | None:
        """The level's delay, None for a level the table does not hold."""
        return self.delays_ms[level - 1] if 0 < level <= self.max_level else None

    def due_ms(self, store_timestamp_ms: int, level: int) -> int:
        """A schedule record's due time, its consume queue tags code: store time + the delay
        of its `DELAY` level (`CommitLog#checkMessageAndReturnSize`)."""
        delay = self.delay_ms(self.clamp(level)) if level > 0 else None
        return store_timestamp_ms + (UNKNOWN_LEVEL_DELAY_MS if delay is None else delay)


def delay_level(properties: bytes | memoryview) -> int:
    """The `DELAY` property of encoded properties as an int; 0 when absent or not a number
    (RocketMQ treats 0 and less as no delay)."""
    encoded = bytes(properties)
    if DELAY_PAIR not in encoded:  # the common message: one C-level search, no decode
        return 0
    return level_of(decode_properties(encoded))


def level_of(properties: Mapping[str, str]) -> int:
    """`delay_level` of decoded properties."""
    value = properties.get(PROPERTY_DELAY, "")
    try:
        return int(value)
    except ValueError:
        return 0
