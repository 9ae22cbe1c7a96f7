"""`ConsumerOffsets`: consumer group offsets on the volume, shared by every notifier replica.

    <directory>/config/consumer-offsets/<group>.json     the group's committed offsets
    <directory>/config/consumer-offsets/<group>.lock     flock'd around each commit

File format (UTF-8 JSON, one object; offsets are the next offset to consume, exclusive, as
RocketMQ's consumers commit them):

    {"version": 1, "group": "billing", "updated_ms": 1700000000000,
     "topics": {"Orders": {"0": 17, "3": 4}}}

The rule for several writers (notifier replicas on one volume; one group's consumers may
commit through different replicas), each commit a compare-and-set under the group's lock:

1. take an exclusive `flock` on `<group>.lock`, polling up to `lock_timeout_ms`;
2. read the file; each named queue's offset becomes max(stored, proposed), so an offset
   never moves backwards (a late or repeated commit cannot undo a newer one), except with
   `reset=True`, where the proposed offsets replace the stored ones (a consumer seeking);
3. if that changed anything: write `<group>.json.creating`, fsync it, rename it over
   `<group>.json`, fsync the directory; then unlock.

Bounds: at most `groups_max` groups have a file (a commit that would create one more raises
`GroupsFullError`; replicas count under different locks, so two racing first commits may
pass the bound by one each), and no file grows past `file_size_bytes_max`
(`GroupOffsetsTooLargeError`, nothing written): a client naming new groups, topics or queue
ids at will cannot fill the volume or the cache.

Readers take no lock: rename is atomic, so they see the previous file or the next, whole.
`flock`, not fcntl record locks: two replicas in one process (the tests) must exclude each
other too, and flock is per open file description.  Group names follow the topic rules
(letters, digits, `%|_-`), at most `GROUP_NAME_BYTES_MAX` bytes.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from ..errors import StoreError, StoreFormatError
from ..format.topic import LEGAL_TOPIC_CHARACTERS, validate_topic
from ..format.volume import CREATING_SUFFIX, OFFSETS_DIRECTORY
from .io import fsync_directory

FORMAT_VERSION = 1
GROUP_NAME_BYTES_MAX = 240
"""ext4's NAME_MAX is 255 bytes; `<group>.json.creating` adds 14."""
TOPIC_NAME_BYTES_MAX = 255
QUEUE_ID_MAX = (1 << 31) - 1
OFFSET_MAX = (1 << 63) - 1
LOCK_POLL_INTERVAL_S = 0.002
"""Between attempts at a held lock: a commit holds it for one small write and two syncs."""
_LEGAL = frozenset(LEGAL_TOPIC_CHARACTERS)
_CACHED_GROUPS_MAX = 10_000
GROUPS_MAX = 10_000
"""Default bound on groups (the notifier's `groups_max`)."""
FILE_SIZE_BYTES_MAX = 1 << 20
"""Default bound on one group's file (the notifier's `group_offsets_file_bytes_max`)."""
OFFSETS_FILE_SUFFIX = ".json"


class GroupNameError(StoreError, ValueError):
    """A consumer group name that breaks the naming rules; the message says which."""


class OffsetsLockTimeoutError(StoreError):
    """Another commit of the same group held its lock for longer than `lock_timeout_ms`."""


class GroupsFullError(StoreError):
    """A commit would create a group's file past `groups_max`; nothing was written."""


class GroupOffsetsTooLargeError(StoreError):
    """A commit would grow a group's file past `file_size_bytes_max`; nothing was written."""


def validate_group(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise GroupNameError("a group name is a non-empty string")
    illegal = sorted(set(name) - _LEGAL)
    if illegal:
        raise GroupNameError(f"group {name!r} has illegal character(s) {illegal}; allowed: "
                             f"letters, digits and % | _ -")
    if len(name) > GROUP_NAME_BYTES_MAX:
        raise GroupNameError(f"group name is {len(name)} characters long; the maximum is "
                             f"{GROUP_NAME_BYTES_MAX}")
    return name


class ConsumerOffsets:
    """Commits may run on several threads at once (each takes the lock); fetches read."""

    def __init__(self, store_directory: Path, *, lock_timeout_ms: int,
                 groups_max: int = GROUPS_MAX,
                 file_size_bytes_max: int = FILE_SIZE_BYTES_MAX) -> None:
        for name, value in (("lock_timeout_ms", lock_timeout_ms), ("groups_max", groups_max),
                            ("file_size_bytes_max", file_size_bytes_max)):
            if value <= 0:
                raise ValueError(f"{name}={value} must be positive")
        self.directory = store_directory / OFFSETS_DIRECTORY
        self._directory_text = str(self.directory)
        self.lock_timeout_ms = lock_timeout_ms
        self.groups_max = groups_max
        self.file_size_bytes_max = file_size_bytes_max
        self._cache: dict[str, tuple[tuple[int, int, int], dict[str, dict[str, int]]]] = {}
        self._cache_lock = threading.Lock()

    def fetch(self, group: str, topic: str) -> dict[int, int]:
        """The committed offsets of `group` on `topic` ({} if it never committed)."""
        validate_group(group)
        return {int(queue_id): offset
                for queue_id, offset in self._read(group).get(topic, {}).items()}

    def commit(self, group: str, topic: str, offsets: Mapping[int, int], *,
               reset: bool = False, seen: Mapping[int, int | None] | None = None
               ) -> dict[int, int]:
        """Merge `offsets` ({queue id: next offset}) by the rule in the module docstring;
        returns the group's offsets on `topic` after the commit.

        `seen` ({queue id: the stored offset when the commit was taken, None if none}): a
        commit taken earlier and written later (the remoting front's).  A queue still as
        seen takes the offset as given (it may move back: a consumer seeking); one moved back
        since (a reset by another front or process) keeps the reset; one moved forward (a
        commit through another replica) takes the larger."""
        validate_group(group)
        validate_topic(topic, size_bytes_max=TOPIC_NAME_BYTES_MAX)
        for queue_id, offset in offsets.items():
            if not 0 <= queue_id <= QUEUE_ID_MAX or not 0 <= offset <= OFFSET_MAX:
                raise ValueError(f"queue {queue_id}: offset {offset} is out of range")
        self.directory.mkdir(parents=True, exist_ok=True)
        lock_fd = self._lock(group)
        try:
            topics = self._read(group, cached=False)
            stored = topics.get(topic, {})
            merged = dict(stored)
            for queue_id, offset in offsets.items():
                key = str(queue_id)
                merged[key] = (offset if reset else _merged(offset, stored.get(key), seen,
                                                             queue_id))
            if merged != stored:
                if not topics:
                    self._check_room_for_group(group)
                topics = {**topics, topic: merged}
                self._write(group, topics)
        finally:
            os.close(lock_fd)  # closing the last descriptor of the description unlocks
        return {int(queue_id): offset for queue_id, offset in merged.items()}

    def group_count(self) -> int:
        """Groups with an offsets file."""
        try:
            with os.scandir(self.directory) as entries:
                return sum(1 for entry in entries if entry.name.endswith(OFFSETS_FILE_SUFFIX))
        except FileNotFoundError:
            return 0

    def groups(self) -> dict[str, list[str]]:
        """Every group with an offsets file and the topics it committed on, by name: what
        an operator lists (`GET /v1/groups`).  A file whose name breaks the group rules
        (left by hand) is not a group and is skipped; a corrupt one raises
        StoreFormatError, as a fetch of it would.  At most `groups_max` files are read."""
        try:
            with os.scandir(self.directory) as entries:
                names = sorted(entry.name[:-len(OFFSETS_FILE_SUFFIX)] for entry in entries
                               if entry.name.endswith(OFFSETS_FILE_SUFFIX))
        except FileNotFoundError:
            return {}
        found: dict[str, list[str]] = {}
        for name in names[:self.groups_max]:
            try:
                validate_group(name)
            except GroupNameError:
                continue
            found[name] = sorted(self._read(name))
        return found

    def _check_room_for_group(self, group: str) -> None:
        """Called under `group`'s lock when it has no file yet: one more file allowed?"""
        count = self.group_count()
        if count >= self.groups_max:
            raise GroupsFullError(f"{count} consumer groups have offsets already; the limit "
                                  f"is {self.groups_max}: group {group!r} is not created")

    # -- files -------------------------------------------------------------------------------
    def path(self, group: str) -> Path:
        return self.directory / f"{group}{OFFSETS_FILE_SUFFIX}"

    def _lock(self, group: str) -> int:
        fd = os.open(self.directory / f"{group}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                     0o644)
        deadline_s = time.monotonic() + self.lock_timeout_ms / 1000
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                    os.close(fd)
                    raise
            if time.monotonic() >= deadline_s:
                os.close(fd)
                raise OffsetsLockTimeoutError(f"{self.directory / group}.lock: held by another "
                                              f"commit for over {self.lock_timeout_ms} ms")
            time.sleep(LOCK_POLL_INTERVAL_S)

    def _read(self, group: str, *, cached: bool = True) -> dict[str, dict[str, int]]:
        """The file's topics.  Cached by (inode, mtime, size) for fetches; a commit reads
        afresh, since a freed inode can be reused within one coarse mtime tick (~4 ms) by a
        file of the same size, and a stale read under the lock could move an offset back."""
        # A string, not a Path: pathlib interns each part, and a client querying new group
        # names at will would grow the interpreter's table of interned strings.
        path = os.path.join(self._directory_text, group + OFFSETS_FILE_SUFFIX)
        try:
            status = os.stat(path)
        except FileNotFoundError:
            return {}
        version = (status.st_ino, status.st_mtime_ns, status.st_size)
        with self._cache_lock:
            entry = self._cache.get(group)
        if cached and entry is not None and entry[0] == version:
            return entry[1]
        try:
            with open(path, "rb") as file:
                document = json.loads(file.read())
        except FileNotFoundError:
            return {}  # replaced between stat and open: the next read sees the new one
        except (ValueError, UnicodeDecodeError) as error:
            raise StoreFormatError(f"{path}: not a consumer offsets file: {error}") from None
        topics = _topics(document, path)
        with self._cache_lock:
            if len(self._cache) >= _CACHED_GROUPS_MAX:
                self._cache.clear()
            self._cache[group] = (version, topics)
        return topics

    def _write(self, group: str, topics: Mapping[str, Mapping[str, int]]) -> None:
        document = {"version": FORMAT_VERSION, "group": group,
                    "updated_ms": time.time_ns() // 1_000_000, "topics": topics}
        path = self.path(group)
        data = json.dumps(document, sort_keys=True).encode()
        if len(data) > self.file_size_bytes_max:
            raise GroupOffsetsTooLargeError(
                f"{path}: the commit would make the file {len(data)} bytes; the limit is "
                f"{self.file_size_bytes_max} (fewer topics or queues per group)")
        creating = path.with_name(path.name + CREATING_SUFFIX)
        fd = os.open(creating, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            written = os.write(fd, data)
            assert written == len(data), "a regular file takes a small write whole"
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(creating, path)
        fsync_directory(self.directory)


def _merged(offset: int, stored: int | None, seen: Mapping[int, int | None] | None,
            queue_id: int) -> int:
    """One queue's offset after a commit of `offset` (ConsumerOffsets.commit)."""
    if seen is None or queue_id not in seen:
        return max(offset, -1 if stored is None else stored)
    base = seen[queue_id]
    if stored == base:
        return offset
    if stored is not None and base is not None and stored < base:
        return stored  # reset after the commit was taken: the reset wins
    return max(offset, -1 if stored is None else stored)


def _topics(document: object, path: str) -> dict[str, dict[str, int]]:
    """The `topics` object of a parsed file, checked: {topic: {"<queue id>": offset}}."""
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise StoreFormatError(f"{path}: not a version {FORMAT_VERSION} consumer offsets file")
    topics = document.get("topics")
    if not isinstance(topics, dict) or not all(
            isinstance(queues, dict) and all(
                key.isdigit() and isinstance(value, int) and not isinstance(value, bool)
                for key, value in queues.items())
            for queues in topics.values()):
        raise StoreFormatError(f"{path}: topics must map each topic to {{queue id: offset}}")
    return topics
