"""The delay-level table both systems under test run with: level n waits n seconds.

RocketMQ's default table (`1s 5s 10s 30s 1m 2m ... 2h`) would make the first retry of a
consumed message wait 10 s (level 3) and the second 30 s; with this one they wait 3 s and 4 s,
so the retry, dead-letter and delay tests take seconds.  RocketMQ gets it as the broker property
`messageDelayLevel` (rocketmq_peer.py), mqstore as the setting `store.message_delay_levels`
(the environment variable below, conftest.py); the Java scenarios get it as `--delay-levels`,
so they know how long each level must wait.  The syntax is RocketMQ's: items split on spaces,
item i is level i + 1, the last character the unit (s, m, h, d).
"""

from __future__ import annotations

TEST_DELAY_LEVELS = " ".join(f"{seconds}s" for seconds in range(1, 19))
"""`1s 2s 3s ... 18s`: 18 levels, as many as RocketMQ's default table."""
ROCKETMQ_PROPERTY = "messageDelayLevel"
MQSTORE_ENV = "MQSTORE_STORE__MESSAGE_DELAY_LEVELS"
UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def delay_ms(level: int, table: str = TEST_DELAY_LEVELS) -> int:
    """The wait of `level` in `table`; a level above the last is clamped to it (as brokers do)."""
    items = table.split()
    if level < 1:
        raise ValueError(f"delay level {level} < 1")
    item = items[min(level, len(items)) - 1]
    return int(item[:-1]) * UNIT_MS[item[-1]]
