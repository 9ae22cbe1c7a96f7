"""`TopicTable`: the topics the front routes, with their queue counts and permissions.

    <data_dir>/config/topics.json    {"version": 1, "topics": {name: {"read_queue_nums",
                                      "write_queue_nums", "perm"}}, "deleted": [names]}

A topic is routed when the table names it, or when the volume holds queues of it (written
through the HTTP API); `DELETE_TOPIC_*` and the notifier's `DELETE /v1/topics/{topic}` mark
it deleted (its data stays until retention takes it: the writer and indexer own the files;
the writer refuses produces to it, services/writer/topic_gate.py) and a later create, or a
send that auto-creates it, revives it.  `TBW102` (the auto-create template) and
`%RETRY%<group>` topics are always routed; system topics cannot be created.

Several notifiers may serve one volume, each with a table: a change is made under an
exclusive lock on `config/topics.lock`, on the file as it is then (read again first), and
written whole (temporary file, fsync, rename, directory fsync); reads take the file again
when its modification time or size changed, so every table sees every other's changes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from mqstore.services.common.topics_file import (
    AUTO_CREATE_TOPIC,
    RETRY_PREFIX,
    TOPICS_FILE,
    is_system_topic,
)
from mqstore.storage import TopicNameError, validate_topic
from mqstore.storage.files.io import fsync_directory

from .codes import MESSAGE_ILLEGAL, SYSTEM_ERROR, TOPIC_NOT_EXIST, RemotingError

TOPICS_LOCK_FILE = TOPICS_FILE.with_suffix(".lock")

PERM_INHERIT, PERM_WRITE, PERM_READ = 1, 2, 4
PERM_READ_WRITE = PERM_READ | PERM_WRITE


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
                 topic_size_bytes_max: int, on_disk: Callable[[], list[str]]) -> None:
        """`topic_size_bytes_max`: the store's (a longer name could be routed and created but
        never written)."""
        self._path = data_dir / TOPICS_FILE
        self.topic_size_bytes_max = topic_size_bytes_max
        self.queue_count_max = queue_count_max
        """The writer's `topic_queue_count`: queue ids it accepts are below it."""
        self._topics_max = topics_max
        self._on_disk = on_disk
        self._topics: dict[str, TopicConfig] = {}
        self._deleted: set[str] = set()
        self._stamp: tuple[int, int] | None = None
        self._refresh()

    def get(self, topic: str) -> TopicConfig | None:
        """The topic's config if it is routed, else None."""
        self._refresh()
        if topic in self._deleted:
            return None
        found = self._topics.get(topic)
        if found is not None:
            return found
        if topic == AUTO_CREATE_TOPIC:
            return TopicConfig(topic, self.queue_count_max, self.queue_count_max,
                               PERM_READ_WRITE | PERM_INHERIT)
        if topic.startswith(RETRY_PREFIX) or topic in self._on_disk():
            return self.default(topic)
        return None

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
        self._refresh()
        names = set(self._topics) | set(self._on_disk())
        return sorted(names - self._deleted)

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
        with self._changing():
            if config.name not in self._topics and len(self._topics) >= self._topics_max:
                # 17, as a send past it (send.py) and HTTP's 404 TOPIC_NOT_EXIST answer
                raise RemotingError(TOPIC_NOT_EXIST, f"the topic table holds "
                                                     f"{len(self._topics)} topics (topics_max)")
            self._topics[config.name] = config
            self._deleted.discard(config.name)

    def delete(self, topic: str) -> bool:
        """Mark `topic` deleted; False (and nothing recorded) if no table routes it, so the
        deleted list holds only topics that existed."""
        if is_system_topic(topic):
            return False
        with self._changing():
            if self.get(topic) is None:
                return False
            self._topics.pop(topic, None)
            self._deleted.add(topic)
            return True

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """Change the file as it is now, under the lock, and write it whole."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path.parent / TOPICS_LOCK_FILE.name,
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._stamp = None
            self._refresh()
            yield
            self._save()
        finally:
            os.close(fd)  # releases the lock

    def _refresh(self) -> None:
        try:
            status = os.stat(self._path)
        except FileNotFoundError:
            return
        stamp = (status.st_mtime_ns, status.st_size)
        if stamp == self._stamp:
            return
        document = json.loads(self._path.read_text(encoding="utf-8"))
        self._topics = {name: TopicConfig(name, int(row["read_queue_nums"]),
                                          int(row["write_queue_nums"]), int(row["perm"]))
                        for name, row in document.get("topics", {}).items()}
        self._deleted = set(document.get("deleted", []))
        self._stamp = stamp

    def _save(self) -> None:
        document = {"version": 1, "deleted": sorted(self._deleted),
                    "topics": {name: {"read_queue_nums": config.read_queue_nums,
                                      "write_queue_nums": config.write_queue_nums,
                                      "perm": config.perm}
                               for name, config in sorted(self._topics.items())}}
        self._path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self._path.with_name(self._path.name + ".creating")
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(document, file, indent=1)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self._path)
        fsync_directory(self._path.parent)
        status = os.stat(self._path)
        self._stamp = (status.st_mtime_ns, status.st_size)

