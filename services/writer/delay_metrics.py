"""The delay schedule's series on the writer's /metrics, read at scrape time.

    mqstore_delay_messages_delivered_total      put back into their own topic when due
    mqstore_delay_messages_skipped_total        undeliverable (no REAL_TOPIC, a topic the
                                                store refuses): logged and passed over
    mqstore_delay_messages_waiting{level}       in the schedule topic, not yet delivered,
                                                per level of `store.message_delay_levels`

Only a master that delivers delays (`writer.delay_enabled`) has a schedule, so only it
exposes these; `mqstore_delay_messages_scheduled_total` (the produces moved into the
schedule) is the writer's own (metrics.py).  The waiting counts come from
`DelaySchedule.pending()`: the schedule queues' ends as its store view last read them (each
pass re-reads them, every `writer.delay_pass_interval_ms`) minus the levels' next offsets,
in memory, so a scrape costs a dict walk over the levels and no file system call.  Every
level of the table is reported, 0 where nothing waits: a level that empties shows 0
rather than vanishing, and the series count is the table's length (18 by default), plus
any queue past it that holds messages (a store RocketMQ wrote with a longer table).
"""

from __future__ import annotations

from mqstore.services.common.observability.metrics import CounterSpec, GaugeSpec, GaugeValue
from mqstore.services.writer.delay_schedule import DelaySchedule
from mqstore.storage.format.delay_levels import DelayLevels


def delay_schedule_metrics(schedule: DelaySchedule, *, levels: DelayLevels) -> list[GaugeSpec]:
    """The series of `schedule`, whose table is `levels`."""

    def waiting() -> GaugeValue:
        counts = dict.fromkeys(range(1, levels.max_level + 1), 0)
        counts.update(schedule.pending())  # a level past the table too (a RocketMQ store's)
        return {(str(level),): float(count) for level, count in sorted(counts.items())}

    return [
        CounterSpec("mqstore_delay_messages_delivered_total",
                    "Delayed messages put back into their own topic when due.",
                    lambda: schedule.delivered_total),
        CounterSpec("mqstore_delay_messages_skipped_total",
                    "Delayed messages that could not be delivered (no REAL_TOPIC, a topic "
                    "or queue the store refuses): logged and passed over.",
                    lambda: schedule.skipped_total),
        GaugeSpec("mqstore_delay_messages_waiting",
                  "Messages in the schedule topic not yet delivered, by delay level.",
                  waiting, labels=("level",)),
    ]
