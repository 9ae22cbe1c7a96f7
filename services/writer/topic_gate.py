"""`TopicGate`: which topics a produce may write, checked before anything is stored.

The writer is the one process every produce passes through (HTTP here, remoting sends
through the forward listener), so the topic rules live here and hold on both fronts:

| the produce names                                  | HTTP                | remoting          |
|----------------------------------------------------|---------------------|-------------------|
| a system topic, `%DLQ%`, or a                      | 403 NO_PERMISSION   | 16 NO_PERMISSION  |
| `%RETRY%` topic outside a consumer's send-back     |                     |                   |
| (the front's own routing of a send-back may write  |                     |                   |
| both: forward kind 2)                              |                     |                   |
| a topic deleted (`config/topics.json`)             | 404 TOPIC_NOT_EXIST | 17                |
| a new topic with `topics.auto_create` off          | 404 TOPIC_NOT_EXIST | 17                |
| a new topic past `topics.topics_max`               | 404 TOPIC_NOT_EXIST | 17                |

A topic is *known* when the log holds a queue of it (the store's queue offsets at start, and
every topic admitted since) or the topics file names it as created.  A request is admitted
or refused whole: its new topics count together against `topics_max`, so one batch naming
50 new topics is refused if 49 would fit.  An admitted topic counts from then on, even if
its put is then refused for another reason (busy, disk full): the bound errs on the safe
side.  Deleting a topic (services/notifier/remoting/topics.py) marks it in the topics file; the gate
refuses it once it looked at the file again (`topics_file_check_interval_ms`).  A deleted
topic that holds queues still counts: its files stay on the volume (docs/http-api.md,
"Topics: creation and deletion"), so cycles of creating and deleting topics cannot grow the
volume past the bound.  Known topics that passed the system topic rules
(services/common/topics/rules.py) are remembered, so the common case costs a set lookup per
topic.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from mqstore.services.common.settings.topics import TopicsSettings
from mqstore.services.common.topics.rules import TopicsWatcher, system_topic_refusal

NO_PERMISSION = "NO_PERMISSION"
TOPIC_NOT_EXIST = "TOPIC_NOT_EXIST"


class TopicRefusal(NamedTuple):
    """Why a request is refused: `status` (NO_PERMISSION or TOPIC_NOT_EXIST, the names of
    RocketMQ's codes 16 and 17) and a reason naming the topic and the setting."""

    status: str
    reason: str

    @property
    def http_status(self) -> int:
        return 403 if self.status == NO_PERMISSION else 404


class TopicGate:
    def __init__(self, settings: TopicsSettings, *, data_dir: Path,
                 known: Iterable[str]) -> None:
        self._settings = settings
        self._known = set(known)
        self._writable: set[str] = set()
        """Known topics a plain produce may write (passed the system topic rules): the
        common case is one set lookup per topic."""
        self._file = TopicsWatcher(
            data_dir, check_interval_ms=settings.topics_file_check_interval_ms)

    def write_queue_count(self, topic: str) -> int | None:
        """The write queue count `topic` was created with (config/topics.json), None for a
        topic created by a produce: a message that names no queue goes to one of these."""
        return self._file.current().write_queue_counts.get(topic)

    @property
    def known_count(self) -> int:
        return len(self._known)

    def admit(self, topics: Iterable[str], *, send_back: bool = False,
              routed: bool = False) -> TopicRefusal | None:
        """Check the distinct `topics` of one request; None admits them all (and counts the
        new ones), else the first refusal, and nothing is counted.  `routed`: the remoting
        front routed the message to a retry or dead letter topic itself (rules.py)."""
        listed = self._file.current()
        new: list[str] = []
        for topic in topics:
            if topic in listed.deleted:
                return TopicRefusal(TOPIC_NOT_EXIST, f"topic {topic} was deleted; create it "
                                                     f"again to write it")
            if topic in self._writable:
                continue
            why = system_topic_refusal(topic, send_back=send_back, routed=routed)
            if why is not None:
                return TopicRefusal(NO_PERMISSION, why)
            if topic not in self._known:
                if topic not in new:
                    new.append(topic)
            elif system_topic_refusal(topic, send_back=False) is None:
                self._writable.add(topic)
        if not new:
            return None
        if not self._settings.auto_create:
            missing = [topic for topic in new if topic not in listed.created]
            if missing:
                return TopicRefusal(TOPIC_NOT_EXIST, f"topic {missing[0]} does not exist and "
                                                     f"topics.auto_create is off; create it "
                                                     f"first")
        total = len(self._known | listed.created) + sum(
            1 for topic in new if topic not in listed.created)
        if total > self._settings.topics_max:
            return TopicRefusal(TOPIC_NOT_EXIST, f"topic {new[0]} does not exist and the "
                                                 f"broker holds the most topics it may "
                                                 f"({self._settings.topics_max}, "
                                                 f"topics.topics_max); nothing was written")
        self._known.update(new)
        self._writable.update(topic for topic in new
                              if system_topic_refusal(topic, send_back=False) is None)
        return None
