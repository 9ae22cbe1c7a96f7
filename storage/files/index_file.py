"""One index file: a hash table on disk from message keys to commit log offsets.

RocketMQ `IndexFile` / `IndexHeader`, byte for byte, so either system reads the other's files:

    index/<creation time yyyyMMddHHmmssSSS, local time>     e.g. 20250914153012045

The service chooses the name (and keeps names strictly increasing, so that sorting the
directory gives creation order); `create` only uses it.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from ..errors import IndexFileCreateError, IndexFileFormatError
from ..format.java_hash import java_string_hash
from .index_put import (
    HASH_SLOT,
    INDEX_ENTRY,
    INDEX_HEADER,
    INT32_MIN,
    INVALID_INDEX,
    IndexedMessage,
    put_index_keys,
)
from .io import fsync_directory, map_existing

# The field tables are in the `IndexFile` docstring.
assert INDEX_HEADER.size == 40
assert HASH_SLOT.size == 4
assert INDEX_ENTRY.size == 20
_ENTRY_DTYPE = np.dtype([("key_hash", ">i4"), ("physical_offset", ">i8"),
                         ("time_diff_seconds", ">i4"), ("previous_index", ">i4")])
assert _ENTRY_DTYPE.itemsize == INDEX_ENTRY.size


def index_file_size_bytes(*, hash_slot_count: int, index_count_max: int) -> int:
    """40 + slots × 4 + entries × 20: 420,000,040 bytes with RocketMQ's defaults."""
    return (INDEX_HEADER.size + hash_slot_count * HASH_SLOT.size
            + index_count_max * INDEX_ENTRY.size)


def index_key_hash(key: str) -> int:
    """RocketMQ `indexKeyHashMethod`: abs(String.hashCode).  abs(Integer.MIN_VALUE) overflows
    back to MIN_VALUE in Java, which RocketMQ then maps to 0; so do we."""
    value = java_string_hash(key)
    return 0 if value == INT32_MIN else abs(value)


def _prepare(fd: int, *, size_bytes: int, end_physical_offset: int,
             end_timestamp_ms: int) -> mmap.mmap:
    """Size, allocate, map and write the header of a new file; durable before it is named,
    so a file found at load is always whole."""
    os.ftruncate(fd, size_bytes)
    os.posix_fallocate(fd, 0, size_bytes)
    mapping = mmap.mmap(fd, size_bytes, mmap.MAP_SHARED)
    try:
        INDEX_HEADER.pack_into(mapping, 0, end_timestamp_ms, end_timestamp_ms,
                               end_physical_offset, end_physical_offset, 0, 1)
        os.fdatasync(fd)
    except BaseException:
        mapping.close()
        raise
    return mapping


class IndexFile:
    """One mmap'd index file: header, slot table, entries.  All big-endian.

    Header, 40 bytes (`INDEX_HEADER`):

        @0   begin_timestamp_ms      int64  store time of entry 1 (before it: the previous
                                            file's end, copied at creation)
        @8   end_timestamp_ms        int64  store time of the newest entry
        @16  begin_physical_offset   int64  commit log offset of entry 1's message
        @24  end_physical_offset     int64  commit log offset of the newest entry's message
        @32  hash_slot_used_count    int32  slots holding a chain (RocketMQ `hashSlotCount`)
        @36  index_count             int32  the next entry number; starts at 1, as entry 0 is
                                            never used (a value <= 0 on load becomes 1)

    Slot table at 40: `hash_slot_count` × int32 (`HASH_SLOT`), the newest entry number of
    the chain of keys whose hash falls in the slot (0 = empty).

    Entries at 40 + 4 × hash_slot_count: `index_count_max` × 20 bytes (`INDEX_ENTRY`),
    entry n at 40 + 4 × hash_slot_count + 20 × n:

        +0   key_hash                int32  `index_key_hash("topic#key")`
        +4   physical_offset         int64  commit log offset of the message
        +12  time_diff_seconds       int32  (store time − begin_timestamp_ms) / 1000, clamped
                                            to [0, INT32_MAX]; 0 while begin_timestamp_ms <= 0
        +16  previous_index          int32  the next older entry of the slot (0 = none)

    Total: `index_file_size_bytes()` = 40 + 4 × slots + 20 × entries.

    Only a key's hash is stored, so two keys with the same Java hashCode ("Aa", "BB") are
    indistinguishable here: `candidates` yields both, and the caller must check the record.

    The first entry of a file that follows a full one stores its time difference against
    the begin time copied from the previous file, and then its own store time becomes
    begin (RocketMQ `putKey` does exactly this): it reads back later than it was stored,
    by the gap between the two messages rounded down to seconds.

    Not thread-safe and not reference counted: the `IndexService` lock serialises the one
    writer and the readers, and a file is closed only under that lock.
    """

    def __init__(self, *, path: Path, fd: int, mapping: mmap.mmap, hash_slot_count: int,
                 index_count_max: int) -> None:
        """Adopt an open, mapped file and read its header (`create`/`open_existing` call
        this); raises `IndexFileFormatError` if the header cannot be this file's."""
        assert hash_slot_count >= 1
        assert index_count_max >= 2
        assert len(mapping) == index_file_size_bytes(hash_slot_count=hash_slot_count,
                                                     index_count_max=index_count_max)
        self.path = path
        self.hash_slot_count = hash_slot_count
        self.index_count_max = index_count_max
        self._fd = fd
        self._mapping = mapping
        self._entries_position = INDEX_HEADER.size + hash_slot_count * HASH_SLOT.size
        header: tuple[int, int, int, int, int, int] = INDEX_HEADER.unpack_from(mapping, 0)
        (self._begin_timestamp_ms, self._end_timestamp_ms, self._begin_physical_offset,
         self._end_physical_offset, self._hash_slot_used_count, index_count) = header
        if index_count > index_count_max:
            raise IndexFileFormatError(
                f"{path}: header index_count={index_count} exceeds index_count_max="
                f"{index_count_max}; the header is corrupt or the file was written with a "
                f"larger index_count_max")
        if (self._hash_slot_used_count < 0 or self._hash_slot_used_count > max(index_count, 1)
                or self._begin_physical_offset > self._end_physical_offset
                or self._begin_physical_offset < 0):
            raise IndexFileFormatError(
                f"{path}: a header that cannot be this file's (begin {self._begin_physical_offset}"
                f", end {self._end_physical_offset}, {self._hash_slot_used_count} slots used, "
                f"index_count {index_count})")
        self._index_count = max(index_count, 1)
        self._dirty = False
        self._closed = False

    # -- creation ----------------------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, *, creating: Path, hash_slot_count: int, index_count_max: int,
               previous_end_physical_offset: int, previous_end_timestamp_ms: int) -> IndexFile:
        """Create a full-size, preallocated file with a fresh header, under a temporary name
        renamed into place, so a crash never leaves an index file of the wrong size.  It is
        prepared as `creating` (in the store's `creating/`, where RocketMQ never looks).

        As RocketMQ does, a positive end of the previous file becomes both begin and end
        here, so a file without entries still orders correctly by time and offset.
        """
        assert previous_end_physical_offset >= 0
        assert previous_end_timestamp_ms >= 0
        if path.exists():
            raise IndexFileCreateError(f"{path}: an index file with this name already exists")
        size_bytes = index_file_size_bytes(hash_slot_count=hash_slot_count,
                                           index_count_max=index_count_max)
        try:
            creating.unlink(missing_ok=True)
            fd = os.open(creating, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise IndexFileCreateError(f"{creating}: cannot create: {error}",
                                       errno_code=error.errno) from error
        try:
            mapping = _prepare(fd, size_bytes=size_bytes,
                               end_physical_offset=previous_end_physical_offset,
                               end_timestamp_ms=previous_end_timestamp_ms)
        except BaseException as error:
            os.close(fd)
            creating.unlink(missing_ok=True)
            if isinstance(error, OSError):
                raise IndexFileCreateError(f"{path}: cannot prepare {size_bytes} bytes: "
                                           f"{error}", errno_code=error.errno) from error
            raise
        try:
            os.rename(creating, path)
            fsync_directory(path.parent)
        except BaseException as error:
            mapping.close()
            os.close(fd)
            if isinstance(error, OSError):
                raise IndexFileCreateError(f"{path}: cannot name the new file: "
                                           f"{error}", errno_code=error.errno) from error
            raise
        return cls(path=path, fd=fd, mapping=mapping, hash_slot_count=hash_slot_count,
                   index_count_max=index_count_max)

    @classmethod
    def open_existing(cls, path: Path, *, hash_slot_count: int,
                      index_count_max: int) -> IndexFile:
        """Map an existing file; its size must match the configured slot and entry counts."""
        size_bytes = index_file_size_bytes(hash_slot_count=hash_slot_count,
                                           index_count_max=index_count_max)
        fd, mapping = map_existing(path, size_bytes=size_bytes, wrong_size=lambda actual: (
            IndexFileFormatError(
                f"{path}: {actual} bytes, but hash_slot_count={hash_slot_count} and "
                f"index_count_max={index_count_max} make {size_bytes}; open the store "
                f"with the settings the index was written with")))
        try:
            return cls(path=path, fd=fd, mapping=mapping, hash_slot_count=hash_slot_count,
                       index_count_max=index_count_max)
        except BaseException:
            mapping.close()
            os.close(fd)
            raise

    # -- header ------------------------------------------------------------------------------
    @property
    def begin_timestamp_ms(self) -> int:
        return self._begin_timestamp_ms

    @property
    def end_timestamp_ms(self) -> int:
        return self._end_timestamp_ms

    @property
    def begin_physical_offset(self) -> int:
        return self._begin_physical_offset

    @property
    def end_physical_offset(self) -> int:
        return self._end_physical_offset

    @property
    def hash_slot_used_count(self) -> int:
        return self._hash_slot_used_count

    @property
    def index_count(self) -> int:
        """The next entry number: entries 1 .. index_count − 1 are written."""
        return self._index_count

    @property
    def entry_count(self) -> int:
        return self._index_count - 1

    @property
    def is_full(self) -> bool:
        """RocketMQ `isWriteFull`: index_count_max − 1 entries are usable (entry 0 is not)."""
        return self._index_count >= self.index_count_max

    @property
    def is_closed(self) -> bool:
        return self._closed

    def overlaps_time_range(self, *, begin_ms: int, end_ms: int) -> bool:
        """RocketMQ `isTimeMatched`: the range covers the file, or an end falls inside it."""
        begin_file_ms = self._begin_timestamp_ms
        end_file_ms = self._end_timestamp_ms
        return ((begin_ms < begin_file_ms and end_ms > end_file_ms)
                or begin_file_ms <= begin_ms <= end_file_ms
                or begin_file_ms <= end_ms <= end_file_ms)

    # -- writing -----------------------------------------------------------------------------
    def put_key(self, key: str, *, physical_offset: int, store_timestamp_ms: int) -> bool:
        """Append an entry for `key` (RocketMQ `putKey`); False when full."""
        return self.put_messages([(physical_offset, store_timestamp_ms, [key])], 0, 0) == (1, 0)

    def put_messages(self, messages: Sequence[IndexedMessage], first: int,
                     key_first: int) -> tuple[int, int]:
        """Append the keys of `messages[first:]` (of the first, from its key `key_first`)
        while the file has room (`put_index_keys`, storage/files/index_put.py); returns where
        it stopped, (message, key): (len(messages), 0) when all were stored."""
        assert not self._closed
        header = [self._begin_timestamp_ms, self._end_timestamp_ms,
                  self._begin_physical_offset, self._end_physical_offset,
                  self._hash_slot_used_count, self._index_count]
        reached = put_index_keys(self._mapping, self._entries_position, self.hash_slot_count,
                                 self.index_count_max, header, messages, first, key_first)
        if header[5] != self._index_count:
            (self._begin_timestamp_ms, self._end_timestamp_ms, self._begin_physical_offset,
             self._end_physical_offset, self._hash_slot_used_count, self._index_count) = header
            self._dirty = True
        return reached

    def lower_end(self, physical_offset: int) -> None:
        """The commit log was cut at `physical_offset` below this file's end (a machine
        crash lost bytes it had indexed): make the end the newest message indexed below it
        (the file's begin if none), so that every record written from the cut on is
        indexed again and the last one kept is not indexed twice.  The entries past the cut
        stay, pointing at whatever the log holds there now; queries check every hit against
        its record, so they only cost a look."""
        assert not self._closed
        assert 0 <= physical_offset < self._end_physical_offset
        entries = np.frombuffer(self._mapping, dtype=_ENTRY_DTYPE,
                                count=self._index_count - 1,
                                offset=self._entries_position + INDEX_ENTRY.size)
        kept = entries["physical_offset"][entries["physical_offset"] < physical_offset]
        newest = int(kept.max()) if kept.size else min(self._begin_physical_offset,
                                                       physical_offset)
        del entries, kept
        self._end_physical_offset = newest
        self._write_header()
        self._dirty = True

    def _write_header(self) -> None:
        INDEX_HEADER.pack_into(self._mapping, 0, self._begin_timestamp_ms,
                               self._end_timestamp_ms, self._begin_physical_offset,
                               self._end_physical_offset, self._hash_slot_used_count,
                               self._index_count)

    # -- reading -----------------------------------------------------------------------------
    def candidates(self, key: str, *, begin_ms: int, end_ms: int) -> Iterator[int]:
        """Commit log offsets of entries whose hash is `key`'s and whose time is in
        [begin_ms, end_ms], newest first (RocketMQ `selectPhyOffset`).

        Walks the slot's chain and stops at a negative time difference, at an entry older
        than `begin_ms`, or at an invalid link.  RocketMQ calls a link invalid when it is
        <= 0, > index_count or the entry itself; here also when it does not point to an
        older entry, which only a corrupt file does, so a corrupt file cannot loop forever.
        A yielded offset may belong to another key with the same hash.
        """
        assert not self._closed
        key_hash = index_key_hash(key)
        (index,) = HASH_SLOT.unpack_from(self._mapping, self._slot_position(key_hash))
        if index <= INVALID_INDEX or index >= self._index_count:
            return
        begin_timestamp_ms = self._begin_timestamp_ms
        while True:
            entry_hash, physical_offset, time_diff_seconds, previous_index = (
                INDEX_ENTRY.unpack_from(self._mapping, self._entry_position(index)))
            if time_diff_seconds < 0:
                return
            entry_timestamp_ms = begin_timestamp_ms + time_diff_seconds * 1000
            if entry_hash == key_hash and begin_ms <= entry_timestamp_ms <= end_ms:
                yield physical_offset
            if (previous_index <= INVALID_INDEX or previous_index >= index
                    or entry_timestamp_ms < begin_ms):
                return
            index = previous_index

    def holds(self, key: str, physical_offset: int) -> bool:
        """Whether this file has an entry of `key`'s hash for the message at
        `physical_offset` (a walk of the key's chain)."""
        return physical_offset in self.candidates(key, begin_ms=0, end_ms=1 << 62)

    def _slot_position(self, key_hash: int) -> int:
        assert key_hash >= 0
        return INDEX_HEADER.size + key_hash % self.hash_slot_count * HASH_SLOT.size

    def _entry_position(self, index: int) -> int:
        assert 0 < index < self.index_count_max
        return self._entries_position + index * INDEX_ENTRY.size

    # -- durability and lifetime ------------------------------------------------------------
    def flush(self) -> bool:
        """fdatasync the file if anything was written since the last flush (os.fdatasync
        releases the GIL; `mmap.flush()` would hold it for the whole msync)."""
        assert not self._closed
        if not self._dirty:
            return False
        os.fdatasync(self._fd)
        self._dirty = False
        return True

    def close(self, *, delete: bool = False) -> None:
        """Unmap and close (the caller flushes first if it wants the entries kept);
        `delete` also removes the file (the caller syncs the directory)."""
        if self._closed:
            return
        self._closed = True
        self._mapping.close()
        os.close(self._fd)
        if delete:
            self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return (f"IndexFile({self.path.name}, entries={self.entry_count}, "
                f"time=[{self._begin_timestamp_ms}, {self._end_timestamp_ms}], "
                f"offsets=[{self._begin_physical_offset}, {self._end_physical_offset}])")
