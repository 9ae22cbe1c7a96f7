"""The message-key index: the ordered `IndexFile`s of `<store>/index/` (RocketMQ
`IndexService`).

Each dispatched message adds `topic#UNIQ_KEY` and `topic#k` for each of its keys to the
newest file; a full file is flushed and the next one created, and the full file's end time
is what the checkpoint may record as `index_msg_timestamp_ms` (every entry up to it is
synced).  After an abnormal exit, `load` drops the files newer than that, and the commit
log's recovery dispatches their messages again; `build` skips any message the newest file
already covers.

Queries differ from RocketMQ in one way: the index stores only a 32-bit hash per key, so
RocketMQ returns other keys' messages on a collision.  Here every candidate is checked by
the caller's `key_matches` (which decodes the record) and the results are exact.

One lock: the dispatch thread builds, readers query, the cleaner deletes.  Nothing is
reference counted because no file is touched outside the lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import ConfigError, IndexFileCreateError, IndexFileFormatError, StoreClosedError
from ..files.index_file import IndexFile, index_file_size_bytes
from ..files.index_put import INT32_MAX, IndexedMessage
from ..files.io import fsync_directory, make_directories
from ..format.volume import (
    CREATING_DIRECTORY,
    CREATING_SUFFIX,
    INDEX_DIRECTORY,
    creating_name,
    index_file_name,
    index_file_name_after,
    parse_index_file_name,
)

log = logging.getLogger(__name__)

INDEX_KEY_SEPARATOR = "#"
"""RocketMQ `buildKey`: topic + "#" + key."""


INDEX_TAG_TYPE = "T"
"""RocketMQ 5's `MessageConst.INDEX_TAG_TYPE`: tag entries are keyed `topic#T#<tags>`."""


def index_key(*, topic: str, key: str, index_type: str | None = None) -> str:
    """RocketMQ `buildKey`: `topic#key`, or `topic#<type>#key` for a typed entry."""
    if index_type:
        return INDEX_KEY_SEPARATOR.join((topic, index_type, key))
    return topic + INDEX_KEY_SEPARATOR + key


def message_index_keys(*, topic: str, keys: Sequence[str], unique_key: str | None,
                       tags: str | None) -> list[str]:
    """What RocketMQ `buildIndex` indexes a message under: `topic#UNIQ_KEY`, `topic#k` for
    each key, and with `tags` (RocketMQ 5 does this) `topic#T#<tags>`.  The caller skips
    rolled-back transactional messages and splits KEYS on spaces; empty keys, and an empty or
    absent unique key, are not indexed."""
    indexed = [topic + INDEX_KEY_SEPARATOR + unique_key] if unique_key else []
    indexed += [topic + INDEX_KEY_SEPARATOR + key for key in keys if key]
    if tags:
        indexed.append(index_key(topic=topic, key=tags, index_type=INDEX_TAG_TYPE))
    return indexed


class IndexService:
    """The index files of one store, oldest first; the last one takes new entries."""

    def __init__(self, *, directory: Path, hash_slot_count: int, index_count_max: int,
                 query_results_max: int) -> None:
        """Raises `ConfigError` for counts no index file can have.

        RocketMQ's defaults are 5,000,000 slots, 20,000,000 entries and 64 results
        (`maxHashSlotNum`, `maxIndexNum`, `maxMsgsNumBatch`); the caller passes them.
        """
        if hash_slot_count < 1:
            raise ConfigError(f"hash_slot_count={hash_slot_count} must be at least 1")
        if index_count_max < 2:
            raise ConfigError(f"index_count_max={index_count_max} must be at least 2 "
                              f"(entry 0 is never used)")
        if query_results_max < 1:
            raise ConfigError(f"query_results_max={query_results_max} must be at least 1")
        size_bytes = index_file_size_bytes(hash_slot_count=hash_slot_count,
                                           index_count_max=index_count_max)
        if size_bytes > INT32_MAX:
            raise ConfigError(f"hash_slot_count={hash_slot_count} and index_count_max="
                              f"{index_count_max} make {size_bytes}-byte index files; RocketMQ "
                              f"addresses them with int positions, so at most {INT32_MAX}")
        self.directory = directory
        self.hash_slot_count = hash_slot_count
        self.index_count_max = index_count_max
        self.query_results_max = query_results_max
        self._files: list[IndexFile] = []
        self._lock = threading.Lock()
        self._loaded = False
        self._closed = False

    # -- startup -----------------------------------------------------------------------------
    def load(self, *, abnormal: bool, index_timestamp_ms: int) -> list[Path]:
        """Open the index files in name (= creation) order; returns the paths dropped.

        After an abnormal exit only files whose entries are all at or before the
        checkpoint's `index_timestamp_ms` are trusted (RocketMQ `IndexService.load`): later
        ones may hold entries that never reached the disk, so they are deleted and rebuilt
        by recovery's re-dispatch.  A file a power loss left short, or whose header cannot
        be its own, is dropped with every later file (logged): they are rebuilt the same way.
        Raises `IndexFileFormatError` when every file has one other size (written with other
        counts).  Names that are not 17-digit times are left alone.
        """
        assert not self._loaded
        self.directory.mkdir(parents=True, exist_ok=True)
        creating = self.directory.parent / CREATING_DIRECTORY
        for leftover in [*self.directory.glob("*" + CREATING_SUFFIX),
                         *creating.glob(creating_name(INDEX_DIRECTORY, "*"))]:
            leftover.unlink()  # a crash while a new file was being prepared
        paths = sorted(path for path in self.directory.iterdir()
                       if parse_index_file_name(path.name) is not None)
        dropped: list[Path] = []
        size_bytes = index_file_size_bytes(hash_slot_count=self.hash_slot_count,
                                           index_count_max=self.index_count_max)
        sizes = {path.stat().st_size for path in paths}
        if paths and size_bytes not in sizes and len(sizes) == 1 and min(sizes) > 0:
            raise IndexFileFormatError(
                f"{self.directory}: index files of {min(sizes)} bytes, but hash_slot_count="
                f"{self.hash_slot_count} and index_count_max={self.index_count_max} make "
                f"{size_bytes}; open the store with the settings the index was written with")
        with self._lock:
            try:
                for number, path in enumerate(paths):
                    try:
                        opened = IndexFile.open_existing(
                            path, hash_slot_count=self.hash_slot_count,
                            index_count_max=self.index_count_max)
                    except IndexFileFormatError as error:
                        log.warning("%s; dropping it and the %d index files after it: they "
                                    "are rebuilt from the log", error, len(paths) - number - 1)
                        for later in paths[number:]:
                            later.unlink()
                        dropped.extend(paths[number:])
                        break
                    if abnormal and opened.end_timestamp_ms > index_timestamp_ms:
                        opened.close(delete=True)
                        dropped.append(path)
                    else:
                        self._files.append(opened)
            except BaseException:
                self._close_files()
                raise
            if dropped:
                fsync_directory(self.directory)
            self._loaded = True
        return dropped

    # -- writing -----------------------------------------------------------------------------
    def build(self, *, topic: str, keys: Sequence[str], unique_key: str | None,
              tags: str | None, physical_offset: int, store_timestamp_ms: int) -> int | None:
        """Index one dispatched message (RocketMQ `buildIndex`): `build_run` of its
        `message_index_keys`."""
        keys_indexed = message_index_keys(topic=topic, keys=keys, unique_key=unique_key,
                                          tags=tags)
        if not keys_indexed:
            return None
        return self.build_run([(physical_offset, store_timestamp_ms, keys_indexed)])

    def build_run(self, messages: Sequence[IndexedMessage]) -> int | None:
        """Index dispatched messages, in log order, under one lock: each is (physical
        offset, store time, its keys as `message_index_keys` gives them).

        A message at or below the newest file's end offset (the newest message indexed) is
        a re-dispatch and is skipped: a reopened store dispatches its last message again,
        and must not index it twice (RocketMQ compares with `<` and does, N+1 times after N
        opens).

        Returns the end time of the newest file that filled up and was flushed if this call
        rolled to a new file (the checkpoint's next `index_msg_timestamp_ms`), else None.
        """
        flushed_end_timestamp_ms: int | None = None
        with self._lock:
            self._check_usable()
            current = self._files[-1] if self._files else self._create_file(previous=None)
            message, key_first, count = 0, 0, len(messages)
            while message < count:
                if current.is_full:
                    current, flushed_end_timestamp_ms = self._roll(current)
                    continue
                physical_offset, store_timestamp_ms, keys = messages[message]
                assert physical_offset >= 0
                if key_first == 0 and physical_offset <= current.end_physical_offset:
                    if physical_offset == current.end_physical_offset:
                        # The newest message indexed, dispatched again: only the keys no
                        # file holds yet (a roll may have split its keys over the last two).
                        kept = [key for key in keys if not any(
                            index_file.holds(key, physical_offset)
                            for index_file in self._files[-2:])]
                        messages = [*messages[:message], (physical_offset, store_timestamp_ms,
                                                          kept), *messages[message + 1:]]
                        message, key_first = current.put_messages(messages, message, 0)
                    else:
                        message += 1
                    continue
                message, key_first = current.put_messages(messages, message, key_first)
        return flushed_end_timestamp_ms

    def cut_back(self, end_position: int) -> int:
        """The commit log now ends at `end_position`, below entries this index holds (a
        machine crash lost committed bytes; recovery cut the log): delete the files whose
        entries all lie past it, and lower the newest survivor's end to it, so that
        re-dispatch indexes the records written there again (`build` skips anything below
        the end).  Returns the files deleted."""
        with self._lock:
            self._check_usable()
            deleted = 0
            while self._files and self._files[-1].entry_count > 0 and \
                    self._files[-1].begin_physical_offset >= end_position:
                self._files.pop().close(delete=True)
                deleted += 1
            if deleted:
                fsync_directory(self.directory)
            if self._files and self._files[-1].end_physical_offset > end_position:
                self._files[-1].lower_end(end_position)
            return deleted

    def _roll(self, full: IndexFile) -> tuple[IndexFile, int]:
        """Flush the full file and start the next one where it ended.  The fdatasync runs
        under the lock: the writes of a full file are mostly written back already, and
        rolls are rare (one per index_count_max − 1 keys)."""
        assert full.is_full
        assert full is self._files[-1]
        full.flush()
        return self._create_file(previous=full), full.end_timestamp_ms

    def _create_file(self, *, previous: IndexFile | None) -> IndexFile:
        name = index_file_name(time.time_ns() // 1_000_000)
        if self._files and name <= self._files[-1].path.name:
            # Same millisecond, or the clock stepped back (NTP, DST): keep names increasing,
            # or load would open files out of order.
            name = index_file_name_after(self._files[-1].path.name)
        creating = self.directory.parent / CREATING_DIRECTORY
        try:
            make_directories(creating, root=self.directory.parent)
        except OSError as error:
            raise IndexFileCreateError(f"{creating}: {error}", errno_code=error.errno) from error
        created = IndexFile.create(
            self.directory / name, creating=creating / creating_name(INDEX_DIRECTORY, name),
            hash_slot_count=self.hash_slot_count,
            index_count_max=self.index_count_max,
            previous_end_physical_offset=previous.end_physical_offset if previous else 0,
            previous_end_timestamp_ms=previous.end_timestamp_ms if previous else 0)
        self._files.append(created)
        return created

    # -- reading -----------------------------------------------------------------------------
    def query(self, *, topic: str, key: str, begin_ms: int, end_ms: int, max_results: int,
              key_matches: Callable[[int], bool], index_type: str | None = None) -> list[int]:
        """Offsets of the messages of `topic` with `key` stored in [begin_ms, end_ms], at
        most min(max_results, query_results_max) of them (the newest), in offset order.

        Files are searched newest first: only those overlapping the range, stopping after
        the first that begins before `begin_ms` (RocketMQ `queryOffset`).  Times are read
        back at one-second resolution, as RocketMQ stores them.  `key_matches(offset)` must
        say whether the message at that offset really has the topic and key; it runs
        under the service's lock, so it must not call back into this service.
        """
        if max_results < 1:
            raise ValueError(f"max_results={max_results} must be at least 1")
        with self._lock:
            self._check_usable()
            return search_files(self._files, topic=topic, key=key, begin_ms=begin_ms,
                                end_ms=end_ms,
                                results_max=min(max_results, self.query_results_max),
                                key_matches=key_matches, index_type=index_type)

    @property
    def file_paths(self) -> list[Path]:
        with self._lock:
            return [index_file.path for index_file in self._files]

    @property
    def entry_count(self) -> int:
        """Entries in all files (a re-dispatched last message counts twice)."""
        with self._lock:
            return sum(index_file.entry_count for index_file in self._files)

    @property
    def end_physical_offset(self) -> int:
        """RocketMQ `indexLastUpdatePhyoffset`: the newest indexed message (0 if none)."""
        with self._lock:
            return self._files[-1].end_physical_offset if self._files else 0

    @property
    def end_timestamp_ms(self) -> int:
        """RocketMQ `indexLastUpdateTimestamp`: its store time (0 if none)."""
        with self._lock:
            return self._files[-1].end_timestamp_ms if self._files else 0

    # -- retention and shutdown ----------------------------------------------------------
    def delete_before(self, physical_offset: int) -> list[Path]:
        """Delete the leading files whose every entry is below `physical_offset` (the
        commit log's new minimum); never the last file.  Returns the paths deleted."""
        deleted: list[Path] = []
        with self._lock:
            self._check_usable()
            while len(self._files) > 1 and self._files[0].end_physical_offset < physical_offset:
                oldest = self._files.pop(0)
                oldest.close(delete=True)
                deleted.append(oldest.path)
            if deleted:
                fsync_directory(self.directory)
        return deleted

    def flush(self) -> None:
        """fdatasync every file written since its last flush.  A failure propagates: the
        store stops rather than record a checkpoint the disk does not hold."""
        with self._lock:
            self._check_usable()
            for index_file in self._files:
                index_file.flush()

    def close(self) -> None:
        """Flush and close every file; later calls raise `StoreClosedError`.  Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                for index_file in self._files:
                    index_file.flush()
            finally:
                self._close_files()

    def _close_files(self) -> None:
        for index_file in self._files:
            index_file.close()
        self._files.clear()

    def _check_usable(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self.directory}: the index service is closed")
        assert self._loaded, "load() the index service before using it"


def search_files(files: Sequence[IndexFile], *, topic: str, key: str, begin_ms: int,
                 end_ms: int, results_max: int, key_matches: Callable[[int], bool],
                 index_type: str | None = None) -> list[int]:
    """The exact key search over `files` (oldest first), shared by the writer-side service
    and the notifier's read-only view: files newest first, only those overlapping
    [begin_ms, end_ms], stopping after the first that begins before `begin_ms`; every
    candidate checked with `key_matches`, so a hash collision is never returned."""
    wanted = index_key(topic=topic, key=key, index_type=index_type)
    found: set[int] = set()
    rejected: set[int] = set()
    for index_file in reversed(files):
        if index_file.overlaps_time_range(begin_ms=begin_ms, end_ms=end_ms):
            for physical_offset in index_file.candidates(wanted, begin_ms=begin_ms,
                                                         end_ms=end_ms):
                if physical_offset in found or physical_offset in rejected:
                    continue  # a message indexed twice, or one key of many
                if key_matches(physical_offset):
                    found.add(physical_offset)
                    if len(found) >= results_max:
                        return sorted(found)
                else:
                    rejected.add(physical_offset)
        if index_file.begin_timestamp_ms < begin_ms:
            break
    return sorted(found)
