"""One commit log segment: a fixed-size file mapped MAP_SHARED, with three positions.

    commitlog/<20-digit start position>     e.g. 00000000001073741824 for the second 1 GiB file

Positions are byte offsets within the file (RocketMQ `MappedFile`):

    0 <= flushed_position <= committed_position <= wrote_position <= size_bytes

* wrote: appended, into the mapping or (pool on) into the borrowed write buffer;
* committed: present in the file's pages (pool on: copied by `commit`; pool off: = wrote);
* flushed: synced to disk by `flush` (os.fdatasync, which releases the GIL; `mmap.flush()`
  holds it for the whole msync).

Readers see bytes below `read_position` only: committed with the pool on, wrote without it.

Reference counting (RocketMQ `ReferenceResource`): the creator holds one reference; a reader
`hold()`s before touching the mapping and `release()`s after.  `destroy()` drops the
creator's reference; the mapping is closed and the file deleted only when the last holder
releases, so a segment a reader holds is never unmapped under it.
"""

from __future__ import annotations

import mmap
import os
import threading
from pathlib import Path

from .config import PAGE_SIZE_BYTES, PreallocateMethod
from .errors import StoreFormatError
from .files import fsync_directory
from .preallocate import prepare_file, prepare_mapping, zero_fill

SEGMENT_NAME_DIGITS = 20
CREATING_SUFFIX = ".creating"
"""A segment being prepared; renamed to its 20-digit name once it has its full size."""


def segment_name(start_position: int) -> str:
    assert start_position >= 0
    return f"{start_position:0{SEGMENT_NAME_DIGITS}d}"


def parse_segment_name(name: str) -> int | None:
    """The start position a file name encodes, or None if it is not a segment name."""
    if len(name) != SEGMENT_NAME_DIGITS or not name.isdigit() or not name.isascii():
        return None
    return int(name)


class CommitLogSegment:
    """A segment file and its mapping.  Positions are relative to `start_position`."""

    def __init__(self, *, path: Path, start_position: int, size_bytes: int, fd: int,
                 mapping: mmap.mmap) -> None:
        assert start_position % size_bytes == 0, "segments start at multiples of their size"
        assert len(mapping) == size_bytes
        self.path = path
        self.start_position = start_position
        self.size_bytes = size_bytes
        self.fd = fd
        self.mapping = mapping
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.last_store_timestamp_ms = 0
        self.write_buffer: mmap.mmap | None = None
        self.write_target: mmap.mmap = mapping
        """Where appends go: the pool buffer while this segment holds one, else the mapping."""
        self._references = 1
        self._available = True
        self._closed = False
        self._delete_on_close = False
        self._reference_lock = threading.Lock()

    # -- creation --------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, *, start_position: int, size_bytes: int,
               method: PreallocateMethod, warmup: bool) -> CommitLogSegment:
        """Create, preallocate and map a new segment file (the allocator's thread runs this).

        The file is prepared under a temporary name and renamed into place, so a crash in
        the middle never leaves a segment of the wrong size behind (load removes leftovers).
        """
        path = directory / segment_name(start_position)
        creating = path.with_name(path.name + CREATING_SUFFIX)
        creating.unlink(missing_ok=True)
        fd = os.open(creating, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            prepare_file(fd, size_bytes, method)
            mapping = mmap.mmap(fd, size_bytes, mmap.MAP_SHARED)
            prepare_mapping(fd, mapping, method, warmup=warmup)
            os.rename(creating, path)
            fsync_directory(directory)
        except BaseException:
            os.close(fd)
            creating.unlink(missing_ok=True)
            raise
        return cls(path=path, start_position=start_position, size_bytes=size_bytes, fd=fd,
                   mapping=mapping)

    @classmethod
    def open_existing(cls, path: Path, *, size_bytes: int) -> CommitLogSegment:
        start_position = parse_segment_name(path.name)
        if start_position is None:
            raise StoreFormatError(f"{path}: not a segment name (20 decimal digits)")
        if start_position % size_bytes:
            raise StoreFormatError(f"{path}: start position {start_position} is not a multiple "
                                   f"of segment_size_bytes={size_bytes}")
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            actual = os.fstat(fd).st_size
            if actual != size_bytes:
                raise StoreFormatError(f"{path}: {actual} bytes, but segment_size_bytes is "
                                       f"{size_bytes}; open the store with the size it was "
                                       f"written with")
            mapping = mmap.mmap(fd, size_bytes, mmap.MAP_SHARED)
        except BaseException:
            os.close(fd)
            raise
        segment = cls(path=path, start_position=start_position, size_bytes=size_bytes, fd=fd,
                      mapping=mapping)
        segment.set_positions(size_bytes)
        return segment

    # -- positions -----------------------------------------------------------------------
    @property
    def read_position(self) -> int:
        return self.committed_position if self.write_buffer is not None else self.wrote_position

    @property
    def end_position(self) -> int:
        return self.start_position + self.size_bytes

    @property
    def is_full(self) -> bool:
        return self.wrote_position == self.size_bytes

    def attach_write_buffer(self, buffer: mmap.mmap) -> None:
        """Pool on: appends to this (new, empty) segment go to `buffer` until committed."""
        assert self.wrote_position == 0
        assert self.write_buffer is None
        assert len(buffer) == self.size_bytes
        self.write_buffer = buffer
        self.write_target = buffer

    def set_positions(self, position: int) -> None:
        """Recovery: everything below `position` is written, committed and flushed."""
        assert 0 <= position <= self.size_bytes
        assert self.write_buffer is None
        self.wrote_position = position
        self.committed_position = position
        self.flushed_position = position

    def truncate(self, position: int) -> None:
        """Recovery: drop everything from `position` on, zeroing it so that no stale record
        past the new end can ever be read back as valid after a later crash."""
        assert 0 <= position <= self.size_bytes
        zero_fill(self.fd, position, last_nonzero_end(self.mapping, position))
        os.fdatasync(self.fd)
        self.set_positions(position)

    # -- commit and flush ----------------------------------------------------------------
    def commit(self, *, pages_min: int) -> tuple[bool, mmap.mmap | None]:
        """Copy [committed, wrote) from the write buffer into the file.

        Returns (moved, buffer to return to the pool once fully committed).  Only the commit
        service and close() call this, serialised by the segment queue's commit lock.
        """
        buffer = self.write_buffer
        if buffer is None:
            moved = self.committed_position != self.wrote_position
            self.committed_position = self.wrote_position
            return moved, None
        wrote = self.wrote_position
        committed = self.committed_position
        if not _able(done=committed, current=wrote, full=wrote == self.size_bytes,
                     pages_min=pages_min):
            return False, None
        with memoryview(buffer) as view:
            position = committed
            while position < wrote:
                written = os.pwrite(self.fd, view[position:wrote], position)
                assert written > 0
                position += written
        self.committed_position = wrote
        if wrote == self.size_bytes:
            self.write_buffer = None
            self.write_target = self.mapping
            return True, buffer
        return True, None

    def flush(self, *, pages_min: int) -> bool:
        """fdatasync the file if enough is unflushed; True if the flushed position moved."""
        readable = self.read_position
        flushed = self.flushed_position
        if not _able(done=flushed, current=readable, full=readable == self.size_bytes,
                     pages_min=pages_min):
            return False
        os.fdatasync(self.fd)
        assert readable >= self.flushed_position
        self.flushed_position = readable
        return True

    # -- reference counting ------------------------------------------------------------------
    def hold(self) -> bool:
        with self._reference_lock:
            if not self._available:
                return False
            self._references += 1
            return True

    def release(self) -> None:
        with self._reference_lock:
            assert self._references > 0, "released more often than held"
            self._references -= 1
            if self._references == 0:
                self._cleanup()

    def close(self, *, delete: bool = False) -> None:
        """Drop the creator's reference; close (and delete) once no reader holds it."""
        with self._reference_lock:
            if not self._available:
                return
            self._available = False
            self._delete_on_close = delete
        self.release()

    @property
    def is_closed(self) -> bool:
        return self._closed

    def _cleanup(self) -> None:
        assert not self._closed
        self._closed = True
        self.mapping.close()
        os.close(self.fd)
        if self._delete_on_close:
            self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return (f"CommitLogSegment({self.path.name}, wrote={self.wrote_position}, "
                f"committed={self.committed_position}, flushed={self.flushed_position})")


def _able(*, done: int, current: int, full: bool, pages_min: int) -> bool:
    """RocketMQ `isAbleToFlush`/`isAbleToCommit`: a full file, or enough dirty pages."""
    if current <= done:
        return False
    if full or pages_min == 0:
        return True
    return current // PAGE_SIZE_BYTES - done // PAGE_SIZE_BYTES >= pages_min


def last_nonzero_end(mapping: mmap.mmap, start_position: int) -> int:
    """One past the last non-zero byte at or after `start_position` (or `start_position` if
    everything from there on is zero).  Scans back a page at a time: a preallocated segment
    is all zeros after its data, so this is fast where it matters."""
    page = PAGE_SIZE_BYTES
    zero_page = bytes(page)
    position = len(mapping) - page
    while position >= start_position:
        if mapping[position:position + page] != zero_page:
            return position + len(mapping[position:position + page].rstrip(b"\0"))
        position -= page
    head = mapping[start_position:position + page].rstrip(b"\0")
    return start_position + len(head)
