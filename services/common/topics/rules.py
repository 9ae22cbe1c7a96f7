"""The system topic rules, and the writer's watch on `config/topics.json`.

The notifiers write the file (services/notifier/remoting/topics.py, through their HTTP routes and
the remoting front; its class and layout: storage/files/topics_file.py): topics created
explicitly and topics deleted.  The writer reads it to decide what a produce may name
(services/writer/topic_gate.py) through `TopicsWatcher`: it looks at the file at most every
`topics.topics_file_check_interval_ms` and parses it only when its modification time or size
changed, so a topic created or deleted through any notifier binds within that interval.

System topics (RocketMQ `TopicValidator`): the broker keeps them for itself, and a plain
send to one is refused as RocketMQ refuses it (NO_PERMISSION):

| topic                         | why                                                        |
|-------------------------------|------------------------------------------------------------|
| `TBW102`                      | the auto-create template; never holds messages             |
| `SCHEDULE_TOPIC_XXXX`         | delayed messages, written by the broker only               |
| `RMQ_SYS_*`, `rmq_sys_*`      | transactions, timers, checks (`RMQ_SYS_TRACE_TOPIC` is     |
|                               | open: RocketMQ clients with tracing on send to it)         |
| `TRANS_CHECK_MAX_TIME_TOPIC`  | halves checked too often; the two TRANS topics and this    |
|                               | one are written only by the front's transactions (`routed`)|
| `OFFSET_MOVED_EVENT`,         | broker events and self tests                               |
| `SELF_TEST_TOPIC`,            |                                                            |
| `BenchmarkTest`               |                                                            |
| `%DLQ%<group>`                | dead letters, moved there by the broker's retry handling   |
|                               | (the front's send-backs: `routed`)                         |
| `%RETRY%<group>`              | only a consumer's send-back: a remoting send carrying the  |
|                               | RETRY_TOPIC property (the client's own fallback), or one   |
|                               | the front routed for CONSUMER_SEND_MSG_BACK                |
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from mqstore.storage.files.topics_file import Topics, TopicsFile, TopicsFileFormatError

log = logging.getLogger(__name__)

AUTO_CREATE_TOPIC = "TBW102"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
RETRY_QUEUE_COUNT = 1
"""Queues of a `%RETRY%` topic: a group's `retryQueueNums` (RocketMQ's default)."""
DEAD_LETTER_QUEUE_COUNT = 1
"""Queues of a `%DLQ%` topic: RocketMQ's `DLQ_NUMS_PER_GROUP`."""
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
SYSTEM_PREFIXES = ("RMQ_SYS_", "rmq_sys_")
"""4.x names its system topics in capitals, 5.x in lower case (and this store's group commit
filler records are `rmq_sys_mqstore_padding`)."""
TRANSACTION_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANSACTION_OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANSACTION_CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRANSACTION_TOPICS = frozenset({TRANSACTION_HALF_TOPIC, TRANSACTION_OP_TOPIC,
                                TRANSACTION_CHECK_MAX_TOPIC})
"""Half messages, op messages, and halves checked `transactionCheckMax` times: written only
by the remoting front's transactions (services/notifier/remoting/transactions.py), routed."""
SYSTEM_TOPICS = frozenset({AUTO_CREATE_TOPIC, "SCHEDULE_TOPIC_XXXX", "OFFSET_MOVED_EVENT",
                           "SELF_TEST_TOPIC", "BenchmarkTest", TRANSACTION_CHECK_MAX_TOPIC})


def is_system_topic(topic: str) -> bool:
    """A topic the broker keeps for itself: never written by a produce, never created."""
    return topic in SYSTEM_TOPICS or (topic.startswith(SYSTEM_PREFIXES) and topic != TRACE_TOPIC)


def system_topic_refusal(topic: str, *, send_back: bool, routed: bool = False) -> str | None:
    """Why a produce may not write `topic` (None: it may).  `send_back`: the produce is a
    consumer's send-back of a failed message (only those may write `%RETRY%` topics);
    `routed`: the broker itself routed it to a `%RETRY%` or `%DLQ%` topic, or a transaction's
    half, op or checked-too-often message to its topic (`TRANSACTION_TOPICS`)."""
    if routed and topic in TRANSACTION_TOPICS:
        return None
    if is_system_topic(topic):
        return f"topic {topic} is a system topic; sending to it is forbidden"
    if routed and topic.startswith((DLQ_PREFIX, RETRY_PREFIX)):
        return None
    if topic.startswith(DLQ_PREFIX):
        return f"topic {topic} is a dead letter queue; only the broker moves messages there"
    if topic.startswith(RETRY_PREFIX) and not send_back:
        return (f"topic {topic} is a retry topic; only a consumer's send-back (with the "
                f"RETRY_TOPIC property) writes it")
    return None


class TopicsSeen(NamedTuple):
    """What the writer needs of the file: topics created explicitly, topics deleted, and the
    write queue count each created topic was given (`mqstore admin topics create --queues`,
    `mqadmin updateTopic -w`)."""

    created: frozenset[str]
    deleted: frozenset[str]
    write_queue_counts: Mapping[str, int] = MappingProxyType({})


EMPTY = TopicsSeen(frozenset(), frozenset())


class TopicsWatcher:
    """Reads `<data_dir>/config/topics.json` again whenever it changed, looking at most
    every `check_interval_ms` (0: at every call).  A file that cannot be parsed is treated as
    empty (logged once) until its writer replaces it: the writer keeps serving."""

    def __init__(self, data_dir: Path, *, check_interval_ms: int) -> None:
        self._file = TopicsFile(data_dir)
        self._check_interval_ns = check_interval_ms * 1_000_000
        self._checked_ns: int | None = None
        self._current = EMPTY
        self._read: Topics | None = None
        self._broken: str | None = None

    def current(self) -> TopicsSeen:
        now_ns = time.monotonic_ns()
        if self._checked_ns is not None and now_ns - self._checked_ns < self._check_interval_ns:
            return self._current
        self._checked_ns = now_ns
        try:
            topics = self._file.read()
        except (OSError, TopicsFileFormatError) as error:
            if str(error) != self._broken:
                log.warning("topics file unreadable, taken as empty: %s", error)
                self._broken = str(error)
            self._current = EMPTY
            return EMPTY
        self._broken = None
        if topics is self._read:
            return self._current  # unchanged: the file parsed the same object
        self._read = topics
        self._current = TopicsSeen(
            frozenset(topics.created), topics.deleted,
            MappingProxyType({name: entry.write_queue_nums
                              for name, entry in topics.created.items()}))
        return self._current
