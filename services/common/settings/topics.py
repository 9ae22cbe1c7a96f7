"""The `topics` section of the config file: which topics a produce may name.

    topics:
      auto_create: true                 # a produce naming a new topic creates it
      topics_max: 1000                  # topics the volume holds, at most

RocketMQ's broker creates a topic on its first send when `autoCreateTopicEnable` is on (its
default; production guides turn it off and create topics with `mqadmin updateTopic`).  Here
the writer applies the switch to every produce, HTTP and remoting alike (the remoting
front's sends pass through the writer), and bounds what auto-creation may cost even when on:
every (topic, queue) is a directory and a consume queue file in two processes, so a single
request naming thousands of new topics must not be able to create them.  Queues per topic
are bounded by `writer.topic_queue_count` (queue ids are below it, on both fronts).
"""

from __future__ import annotations

import dataclasses

from mqstore.storage import ConfigError


@dataclasses.dataclass(frozen=True, kw_only=True)
class TopicsSettings:
    """The writer's topic rules (services/writer/topic_gate.py)."""

    auto_create: bool = True
    """A produce naming a topic the volume does not hold creates it (RocketMQ's
    `autoCreateTopicEnable`, on by default there too: `mqstore up` on a laptop just works).
    Off: such a produce is refused (HTTP 404 TOPIC_NOT_EXIST, remoting 17) and only topics
    created explicitly (remoting UPDATE_AND_CREATE_TOPIC, `mqadmin updateTopic`) or already
    holding messages are written."""

    topics_max: int = 1_000
    """Topics the volume may hold; a produce that would create one more is refused and writes
    nothing.  With `writer.topic_queue_count` 8 queues each and 64 KiB reserved per new
    consume queue file (`store.consume_queue_allocate_step_bytes`), 1,000 topics cost at most
    512 MiB of disk before any message fills them, and 8,000 queue directories."""

    topics_file_check_interval_ms: int = 100
    """How often the writer looks at `config/topics.json` (one stat) for topics the
    notifiers created or deleted: a deletion binds produces within 100 ms.  Looking at every
    request cost 8 µs of the writer's ~90 µs per single-message request (this project's VM,
    timeit of the gate); 0 looks at every request."""

    def __post_init__(self) -> None:
        if self.topics_max <= 0:
            raise ConfigError(f"topics_max={self.topics_max} must be positive")
        if self.topics_file_check_interval_ms < 0:
            raise ConfigError(f"topics_file_check_interval_ms="
                              f"{self.topics_file_check_interval_ms} must not be negative")
