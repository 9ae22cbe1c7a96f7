"""Which queue a message goes to when its producer names none: the one rule of the writer's
HTTP produce and the remoting front's sends (each keeps a table of its own).

Round robin per topic over `topic_queue_count` queues (or the fewer a topic was created
with: `mqstore admin topics create --queues`, `mqadmin updateTopic -w`), as RocketMQ's
default producer selector does: the load spreads evenly and consumers of every queue get
work.  Hashing the
keys would be the other choice (messages of one key stay in order in one queue); producers
that need that name the queue themselves.  A batch request takes one choice per topic, so
its messages of a topic stay contiguous in one queue, as a RocketMQ batch does.
"""

from __future__ import annotations

TOPICS_REMEMBERED_MAX = 65_536
"""Bound on remembered topics; a full table is cleared (choices then restart at queue 0)."""


class RoundRobinQueues:
    def __init__(self, *, queue_count: int) -> None:
        assert queue_count > 0
        self.queue_count = queue_count
        self._next: dict[str, int] = {}

    def choose(self, topic: str, *, queue_count: int | None = None) -> int:
        """The next queue of `topic`, below `queue_count` (a topic created with fewer queues
        than `topic_queue_count`; None: all of them)."""
        count = self.queue_count if queue_count is None else min(queue_count, self.queue_count)
        assert count > 0
        queue_id = self._next.get(topic, 0) % count
        if len(self._next) >= TOPICS_REMEMBERED_MAX and topic not in self._next:
            self._next.clear()
        self._next[topic] = (queue_id + 1) % count
        assert 0 <= queue_id < count
        return queue_id
