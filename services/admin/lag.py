"""A consumer group's lag on a topic: RocketMQ's `consumerProgress` diff, summed over the
topic's queues.  Pure: `mqstore admin groups describe` and the operator's drain of a group
being removed (operator/drain.py) both fetch the same two documents and call this.

    queues      GET /v1/topics/{topic}/queues          [{"queue_id", "min_offset", "max_offset"}]
    committed   GET /v1/groups/{group}/offsets?topic=  {queue_id: next offset to consume}

A queue the group never committed on counts from min_offset: a new consumer of the group
starts there (the notifier's rule for polls, services/notifier/pulls.py).  A committed
offset past max_offset (a reset, a queue retention emptied) is no lag, not a negative one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def queue_lag(queue: Mapping[str, int], committed_offset: int | None) -> int:
    """Messages of one queue the group has not read: max_offset minus where it reads next."""
    start = queue["min_offset"] if committed_offset is None else committed_offset
    return max(queue["max_offset"] - start, 0)


def lag(queues: Sequence[Mapping[str, int]], committed: Mapping[int, int]) -> int:
    """The group's lag on the topic: the sum over every queue of `queue_lag`."""
    return sum(queue_lag(queue, committed.get(queue["queue_id"])) for queue in queues)
