"""Streaming offsets: per (topic, queue id), the next consume queue offset to read, as
Kafka's source keeps one per topic partition.

In the checkpoint and in `startingOffsets` they are JSON, topic → queue id → offset:

    {"Orders": {"0": 1200, "1": 1187}, "Payments": {"0": 15}}

In `startingOffsets`, -2 means the queue's earliest offset and -1 its latest, as in Kafka.
A queue absent from an offset is read from its start when it first appears.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

QueueKey = tuple[str, int]
Offsets = dict[QueueKey, int]

EARLIEST = -2
LATEST = -1


def offsets_to_json(offsets: Mapping[QueueKey, int]) -> dict[str, dict[str, int]]:
    """The JSON-able form Spark stores in the checkpoint's offset log."""
    result: dict[str, dict[str, int]] = {}
    for (topic, queue_id), offset in sorted(offsets.items()):
        assert offset >= 0, f"{topic}/{queue_id}: offset {offset}"
        result.setdefault(topic, {})[str(queue_id)] = offset
    return result


def offsets_from_json(value: object, *, allow_special: bool = False,
                      what: str = "offset") -> Offsets:
    """Parse the JSON form (already decoded, or text); `ValueError` says what is wrong."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"{what}: not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected an object of topic -> {{queue id: offset}}, "
                         f"got {type(value).__name__}")
    offsets: Offsets = {}
    for topic, queues in value.items():
        if not isinstance(queues, dict):
            raise ValueError(f"{what}: topic {topic!r} must map queue ids to offsets")
        for queue_id, offset in queues.items():
            if not isinstance(queue_id, str) or not queue_id.isdigit():
                raise ValueError(f"{what}: {topic!r}: queue id {queue_id!r} is not a "
                                 f"non-negative integer")
            minimum = EARLIEST if allow_special else 0
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < minimum:
                raise ValueError(f"{what}: {topic}/{queue_id}: offset {offset!r} must be an "
                                 f"integer >= 0" + (" or -2 (earliest), -1 (latest)"
                                                    if allow_special else ""))
            offsets[topic, int(queue_id)] = offset
    return offsets


def cap_by_rows(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int],
                rows_max: int) -> Offsets:
    """`end` moved back so that at most `rows_max` offsets lie between `start` and it.

    Each queue gets a share proportional to its backlog (rounded down), and what rounding
    left over goes one offset at a time to the queues with the largest backlog, so a limit
    of at least 1 always makes progress and no queue starves.
    """
    assert rows_max >= 0
    backlog = {key: max(0, value - start.get(key, 0)) for key, value in end.items()}
    total = sum(backlog.values())
    if total <= rows_max:
        return dict(end)
    share = {key: lag * rows_max // total for key, lag in backlog.items()}
    left = rows_max - sum(share.values())
    for key in sorted(backlog, key=lambda k: (-(backlog[k] - share[k]), k)):
        if left == 0:
            break
        if share[key] < backlog[key]:
            share[key] += 1
            left -= 1
    return {key: start.get(key, 0) + share[key] for key in end}
