"""`TopicsFile`: `config/topics.json`, the topics created and deleted through the notifiers
(HTTP and the remoting front), read by every process of a volume.

    <store>/config/topics.json    UTF-8 JSON, one object, written whole:
        {"version": 1,
         "topics": {"<name>": {"read_queue_nums": 4, "write_queue_nums": 4, "perm": 6}},
         "deleted": ["<name>", ...]}
    <store>/config/topics.lock    flock'd around each change

| field              | meaning                                                          |
|--------------------|------------------------------------------------------------------|
| `topics`           | topics created explicitly, with RocketMQ's `TopicConfig` counts  |
|                    | and permission (`perm`: 2 write, 4 read, 1 inherit)              |
| `deleted`          | topics deleted: routed nowhere, refused by the writer; a later   |
|                    | create (or an auto-create) removes the name from here            |

Several notifiers may serve one volume: a change takes an exclusive `flock` on
`config/topics.lock`, reads the file as it is then, and writes it whole (a temporary file,
fsync, rename, directory fsync), so no change of another is lost.  Reads take no lock (a
rename is atomic) and parse the file again only when its modification time or size changed.
A file that is not this format raises `TopicsFileFormatError` naming the path and the rule.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePath
from types import MappingProxyType
from typing import NamedTuple

from ..errors import StoreFormatError
from ..format.volume import CREATING_SUFFIX
from .io import fsync_directory

TOPICS_FILE = PurePath("config") / "topics.json"
TOPICS_LOCK_FILE = PurePath("config") / "topics.lock"
FORMAT_VERSION = 1
PERM_INHERIT, PERM_WRITE, PERM_READ = 1, 2, 4
_COUNTS = ("read_queue_nums", "write_queue_nums", "perm")


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
        if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
            raise TopicsFileFormatError(f"{self.path}: not a version {FORMAT_VERSION} topics "
                                        f"file")
        topics, deleted = document.get("topics", {}), document.get("deleted", [])
        if not isinstance(topics, dict) or not isinstance(deleted, list) or \
                not all(isinstance(name, str) for name in deleted):
            raise TopicsFileFormatError(f"{self.path}: topics must be an object and deleted "
                                        f"a list of names")
        created: dict[str, TopicEntry] = {}
        for name, row in topics.items():
            if not isinstance(row, dict) or not all(
                    type(row.get(field)) is int for field in _COUNTS):
                raise TopicsFileFormatError(f"{self.path}: topic {name!r} needs integer "
                                            f"{', '.join(_COUNTS)}")
            created[name] = TopicEntry(*(row[field] for field in _COUNTS))
        return Topics(MappingProxyType(created), frozenset(deleted))

    def _write(self, change: TopicsChange) -> None:
        document = {"version": FORMAT_VERSION, "deleted": sorted(change.deleted),
                    "topics": {name: entry._asdict()
                               for name, entry in sorted(change.created.items())}}
        temporary = self.path.with_name(self.path.name + CREATING_SUFFIX)
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(document, file, indent=1)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        fsync_directory(self.path.parent)
        self._stamp = None
        self.read()
