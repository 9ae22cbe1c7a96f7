"""`TopicsFile`: `config/topics.json`, the topics created and deleted through the notifiers
(HTTP and the remoting front), read by every process of a volume.

    <store>/config/topics.json    UTF-8 JSON, RocketMQ's `TopicConfigSerializeWrapper`:
        {"dataVersion": {"counter": 3, "stateVersion": 0, "timestamp": 1795813063621},
         "topicConfigTable": {"<name>": {"topicName": "<name>", "readQueueNums": 4,
                                         "writeQueueNums": 4, "perm": 6,
                                         "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                         "order": false, "attributes": {}}},
         "mqstoreDeletedTopics": ["<name>", ...]}
    <store>/config/topics.lock    flock'd around each change

| field                  | meaning                                                      |
|------------------------|--------------------------------------------------------------|
| `topicConfigTable`     | topics created explicitly (or by RocketMQ's broker, when it  |
|                        | wrote the store), with their counts and permission (`perm`:  |
|                        | 2 write, 4 read, 1 inherit)                                  |
| `mqstoreDeletedTopics` | topics deleted: routed nowhere, refused by the writer; a     |
|                        | later create (or an auto-create) removes the name from here. |
|                        | RocketMQ ignores the field (a deleted topic is simply absent |
|                        | from its table)                                              |

RocketMQ's own layout, so a store moves between RocketMQ's broker and mqstore with its
topics: each reads the other's file, and a table entry's other fields (`order`,
`attributes`, ...) are written back as they were read.  The file mqstore wrote before
(`{"version": 1, "topics": {...}, "deleted": [...]}`) is read too and rewritten in this
layout at the next change.

Several notifiers may serve one volume: a change takes an exclusive `flock` on
`config/topics.lock`, reads the file as it is then, and writes it whole (a temporary file,
fsync, rename, directory fsync), so no change of another is lost.  Reads take no lock (a
rename is atomic) and parse the file again only when its modification time or size changed.
A file that is neither layout raises `TopicsFileFormatError` naming the path and the rule.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePath
from types import MappingProxyType
from typing import NamedTuple

from ..errors import StoreFormatError
from ..format.volume import CREATING_SUFFIX
from .io import fsync_directory

TOPICS_FILE = PurePath("config") / "topics.json"
TOPICS_LOCK_FILE = PurePath("config") / "topics.lock"
LEGACY_FORMAT_VERSION = 1
"""mqstore's own layout before RocketMQ's: read, never written."""
PERM_INHERIT, PERM_WRITE, PERM_READ = 1, 2, 4
_COUNTS = ("read_queue_nums", "write_queue_nums", "perm")
_ROCKETMQ_COUNTS = ("readQueueNums", "writeQueueNums", "perm")
TABLE, DELETED = "topicConfigTable", "mqstoreDeletedTopics"
NEW_ROW_FIELDS = {"topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
                  "attributes": {}}
"""A new topic's other `TopicConfig` fields: RocketMQ's defaults."""


class TopicsFileFormatError(StoreFormatError):
    """`config/topics.json` is not a topics file; the message names the path and the rule."""


class TopicEntry(NamedTuple):
    """One created topic (RocketMQ `TopicConfig`'s counts and permission)."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int


class Topics(NamedTuple):
    """What the file says: created topics and deleted names."""

    created: Mapping[str, TopicEntry]
    deleted: frozenset[str]


EMPTY = Topics(MappingProxyType({}), frozenset())


@dataclasses.dataclass
class TopicsChange:
    """The file's contents inside `TopicsFile.changing`, to be changed in place."""

    created: dict[str, TopicEntry]
    deleted: set[str]


class TopicsFile:
    def __init__(self, store_directory: Path) -> None:
        self.path = store_directory / TOPICS_FILE
        self._lock_path = store_directory / TOPICS_LOCK_FILE
        self._stamp: tuple[int, int] | None = None
        self._current = EMPTY
        self._rows: dict[str, dict[str, object]] = {}
        """Each table entry as last read, so its other fields are written back unchanged."""
        self._counter = 0
        """`dataVersion.counter` as last read."""

    def read(self) -> Topics:
        """The file as it is now (EMPTY when there is none)."""
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._current = None, EMPTY
            return EMPTY
        stamp = (status.st_mtime_ns, status.st_size)
        if stamp != self._stamp:
            self._current = self._parse()
            self._stamp = stamp
        return self._current

    @contextlib.contextmanager
    def changing(self) -> Iterator[TopicsChange]:
        """Change the file as it is now, under the lock; written whole when the block ends
        without an exception and changed anything."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._stamp = None  # read afresh: a change must start from the file's bytes
            before = self.read()
            change = TopicsChange(dict(before.created), set(before.deleted))
            yield change
            if change.created != before.created or change.deleted != before.deleted:
                self._write(change)
        finally:
            os.close(fd)  # releases the lock

    def _parse(self) -> Topics:
        try:
            with open(self.path, "rb") as file:
                document = json.loads(file.read())
        except FileNotFoundError:
            return EMPTY  # replaced between stat and open: the next read sees the new one
        except (ValueError, UnicodeDecodeError) as error:
            raise TopicsFileFormatError(f"{self.path}: not JSON: {error}") from None
        if isinstance(document, dict) and document.get("version") == LEGACY_FORMAT_VERSION:
            topics, deleted, counts = document.get("topics", {}), document.get("deleted", []), \
                _COUNTS
        elif isinstance(document, dict) and TABLE in document:
            topics, deleted, counts = document[TABLE], document.get(DELETED, []), \
                _ROCKETMQ_COUNTS
            version = document.get("dataVersion")
            if isinstance(version, dict) and type(version.get("counter")) is int:
                self._counter = version["counter"]
        else:
            raise TopicsFileFormatError(f"{self.path}: neither RocketMQ's topics file (no "
                                        f"{TABLE}) nor a version {LEGACY_FORMAT_VERSION} one")
        if not isinstance(topics, dict) or not isinstance(deleted, list) or \
                not all(isinstance(name, str) for name in deleted):
            raise TopicsFileFormatError(f"{self.path}: the topics must be an object and the "
                                        f"deleted a list of names")
        created: dict[str, TopicEntry] = {}
        rows: dict[str, dict[str, object]] = {}
        for name, row in topics.items():
            if not isinstance(row, dict) or not all(
                    type(row.get(field)) is int for field in counts):
                raise TopicsFileFormatError(f"{self.path}: topic {name!r} needs integer "
                                            f"{', '.join(counts)}")
            created[name] = TopicEntry(*(row[field] for field in counts))
            rows[name] = row if counts is _ROCKETMQ_COUNTS else {}
        self._rows = rows
        return Topics(MappingProxyType(created), frozenset(deleted))

    def _write(self, change: TopicsChange) -> None:
        self._counter += 1
        table = {}
        for name, entry in sorted(change.created.items()):
            row = {**NEW_ROW_FIELDS, **self._rows.get(name, {}), "topicName": name}
            row.update(zip(_ROCKETMQ_COUNTS, entry, strict=True))
            table[name] = row
        document = {"dataVersion": {"counter": self._counter, "stateVersion": 0,
                                    "timestamp": int(time.time() * 1000)},
                    TABLE: table, DELETED: sorted(change.deleted)}
        temporary = self.path.with_name(self.path.name + CREATING_SUFFIX)
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(document, file, indent=1)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        fsync_directory(self.path.parent)
        self._stamp = None
        self.read()
