"""`TopicTable`: the topics the front routes, with their queue counts and permissions, kept in
`config/topics.json` (storage/files/topics_file.py: its layout, and how several notifiers
change it safely).

A topic is routed when the table names it, or when the volume holds queues of it (written
through the HTTP API); `DELETE_TOPIC_*` and the notifier's `DELETE /v1/topics/{topic}` mark
it deleted (its data stays until retention takes it: the writer and indexer own the files;
the writer refuses produces to it, services/writer/topic_gate.py) and a later create, or a
send that auto-creates it, revives it.  `TBW102` (the auto-create template) and
`%RETRY%<group>` topics are always routed; system topics cannot be created.  Every table
reads the file again when it changed, so it sees every other's changes: a send's lookup
(`get`) trusts a topic it found for `TOPIC_READ_INTERVAL_MS` (one `stat` per send cost ~4 µs
of the front's time), and looks again at once for one it did not find.  A topic deleted by
another process may so take one more send in that window; the writer refuses it
(services/writer/topic_gate.py).

The broker's permission (`brokerPermission` in `config/broker.properties`, set by
`mqadmin updateBrokerConfig`, broker_config.py) is read with the topics: while it lacks
read or write, every topic is served with the broker's permission instead of its own, as
RocketMQ's broker registers it, so routes and registrations stop sends to a draining
broker.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import NamedTuple

from mqstore.services.common.topics.rules import (
    AUTO_CREATE_TOPIC,
    DEAD_LETTER_QUEUE_COUNT,
    DLQ_PREFIX,
    RETRY_PREFIX,
    RETRY_QUEUE_COUNT,
    is_system_topic,
)
from mqstore.services.notifier.remoting.codes import (
    MESSAGE_ILLEGAL,
    SYSTEM_ERROR,
    TOPIC_NOT_EXIST,
    RemotingError,
)
from mqstore.storage import TopicNameError, validate_topic
from mqstore.storage.files.broker_properties import BrokerPropertiesFile
from mqstore.storage.files.topics_file import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    TopicEntry,
    Topics,
    TopicsFile,
)

PERM_READ_WRITE = PERM_READ | PERM_WRITE
TOPIC_READ_INTERVAL_MS = 100
BROKER_PERMISSION_KEY = "brokerPermission"


class TopicConfig(NamedTuple):
    name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int

    def to_json(self) -> dict[str, object]:
        """RocketMQ's `TopicConfig` as its JSON bodies carry it."""
        return {"order": False, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicFilterType": "SINGLE_TAG", "topicName": self.name, "topicSysFlag": 0,
                "writeQueueNums": self.write_queue_nums, "attributes": {}}


class TopicTable:
    def __init__(self, data_dir: Path, *, queue_count_max: int, topics_max: int,
                 topic_size_bytes_max: int, on_disk: Callable[[], AbstractSet[str]],
                 reply_topic: str = "") -> None:
        """`topic_size_bytes_max`: the store's (a longer name could be routed and created but
        never written).  `on_disk`: the topics the volume holds queues of (a set: a send's
        lookup must not cost more as topics are added).  `reply_topic`: the cluster's
        `<cluster>_REPLY_TOPIC`, always routed with one queue as RocketMQ creates it at start
        (reply.py)."""
        self._file = TopicsFile(data_dir)
        self.reply_topic = reply_topic
        self.topic_size_bytes_max = topic_size_bytes_max
        self.queue_count_max = queue_count_max
        """The writer's `topic_queue_count`: queue ids it accepts are below it."""
        self._topics_max = topics_max
        self._on_disk = on_disk
        self._topics: Topics = self._file.read()
        self.properties = BrokerPropertiesFile(data_dir)
        self.broker_permission = broker_permission(self.properties.read())
        """`brokerPermission` as last read (PERM_READ_WRITE when unset)."""
        self._dead_letter_topics: set[str] = set()
        """`%DLQ%<group>` topics this front stored into (`add_dead_letter_topic`)."""
        self._read_s = -math.inf
        """When `get` last read the file (monotonic seconds)."""

    def get(self, topic: str) -> TopicConfig | None:
        """The topic's config if it is routed, else None."""
        now_s = time.monotonic()
        fresh = now_s - self._read_s >= TOPIC_READ_INTERVAL_MS / 1000
        if fresh:
            self._read_files(now_s)
        found = self._routed(topic, self._topics.created, self._topics.deleted)
        if found is None and not fresh:
            self._read_files(now_s)
            found = self._routed(topic, self._topics.created, self._topics.deleted)
        permission = self.broker_permission
        if found is None or permission & PERM_READ_WRITE == PERM_READ_WRITE:
            return found
        return found._replace(perm=permission)

    def _read_files(self, now_s: float) -> None:
        self._topics, self._read_s = self._file.read(), now_s
        self.broker_permission = broker_permission(self.properties.read())

    def read_again(self) -> None:
        """Read the files at the next lookup (after this process changed one)."""
        self._read_s = -math.inf

    def _routed(self, topic: str, created: Mapping[str, TopicEntry],
                deleted: AbstractSet[str]) -> TopicConfig | None:
        if topic in deleted:
            return None
        found = created.get(topic)
        if found is not None:
            return TopicConfig(topic, *found)
        if topic == AUTO_CREATE_TOPIC:
            return TopicConfig(topic, self.queue_count_max, self.queue_count_max,
                               PERM_READ_WRITE | PERM_INHERIT)
        if topic == self.reply_topic:
            return TopicConfig(topic, 1, 1, PERM_READ_WRITE)
        if topic.startswith(RETRY_PREFIX):  # one queue, as RocketMQ's `retryQueueNums`
            return TopicConfig(topic, RETRY_QUEUE_COUNT, RETRY_QUEUE_COUNT, PERM_READ_WRITE)
        if topic.startswith(DLQ_PREFIX):  # routed once it holds a message
            held = topic in self._dead_letter_topics or topic in self._on_disk()
            return TopicConfig(topic, DEAD_LETTER_QUEUE_COUNT, DEAD_LETTER_QUEUE_COUNT,
                               PERM_READ_WRITE) if held else None
        if topic in self._on_disk():
            return self.default(topic)
        return None

    def add_dead_letter_topic(self, topic: str) -> None:
        """Route `topic` (a `%DLQ%<group>`) from now on: this front has sent a message to it,
        as RocketMQ creates the topic when it dead-letters the first message.  Without this
        a consumer asking right after the send-back could find no route until the message
        is dispatched and the store view has noticed its queue.  Bounded by `topics_max`
        (past it the topic is routed once the view notices it, as before)."""
        assert topic.startswith(DLQ_PREFIX), topic
        if len(self._dead_letter_topics) < self._topics_max:
            self._dead_letter_topics.add(topic)

    def check_name(self, topic: str) -> None:
        """MESSAGE_ILLEGAL with the rule broken, as the writer would refuse the name."""
        try:
            validate_topic(topic, size_bytes_max=self.topic_size_bytes_max)
        except TopicNameError as error:
            raise RemotingError(MESSAGE_ILLEGAL, str(error)) from None

    def require(self, topic: str) -> TopicConfig:
        found = self.get(topic)
        if found is None:
            raise RemotingError(TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first "
                                                 f"please!")
        return found

    def default(self, topic: str, queue_nums: int | None = None) -> TopicConfig:
        count = min(queue_nums or self.queue_count_max, self.queue_count_max)
        return TopicConfig(topic, count, count, PERM_READ_WRITE)

    def names(self) -> list[str]:
        topics = self._file.read()
        names = set(topics.created) | set(self._on_disk()) | {self.reply_topic} - {""}
        return sorted(names - topics.deleted)

    def create(self, config: TopicConfig) -> None:
        self.check_name(config.name)
        if is_system_topic(config.name):  # RocketMQ's answer to `updateTopic` of one
            raise RemotingError(SYSTEM_ERROR, f"The topic[{config.name}] is conflict with "
                                              f"system topic.")
        for what, count in (("readQueueNums", config.read_queue_nums),
                            ("writeQueueNums", config.write_queue_nums)):
            if not 0 < count <= self.queue_count_max:
                raise RemotingError(SYSTEM_ERROR, f"{what}={count} must be in 1.."
                                                  f"{self.queue_count_max} (the writer's "
                                                  f"topic_queue_count)")
        with self._file.changing() as change:
            if config.name not in change.created and len(change.created) >= self._topics_max:
                # 17, as a send past it (send.py) and HTTP's 404 TOPIC_NOT_EXIST answer
                raise RemotingError(TOPIC_NOT_EXIST, f"the topic table holds "
                                                     f"{len(change.created)} topics "
                                                     f"(topics_max)")
            change.created[config.name] = TopicEntry(config.read_queue_nums,
                                                     config.write_queue_nums, config.perm)
            change.deleted.discard(config.name)
        self._read_s = -math.inf

    def delete(self, topic: str) -> bool:
        """Mark `topic` deleted; False (and nothing recorded) if no table routes it, so the
        deleted list holds only topics that existed."""
        if is_system_topic(topic):
            return False
        with self._file.changing() as change:
            if self._routed(topic, change.created, change.deleted) is None:
                return False
            change.created.pop(topic, None)
            change.deleted.add(topic)
        self._read_s = -math.inf
        return True


def broker_permission(properties: Mapping[str, str]) -> int:
    """`brokerPermission` of the broker properties; PERM_READ_WRITE when unset or not a
    permission (the handler refuses such a value, so only a hand edit writes one)."""
    value = properties.get(BROKER_PERMISSION_KEY, "")
    return int(value) if value.isdigit() and int(value) <= 7 else PERM_READ_WRITE
