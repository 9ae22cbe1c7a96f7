"""A fixed-size file mapped MAP_SHARED, with positions and reference counting.

The shared mechanics of every mapped on-disk structure (RocketMQ `MappedFile`): the commit
log's segments (`segment.py`) and the consume queues' files (`consume_queue_file.py`) add only
their own formats.  Files are named by the 20-digit position of their first byte:

    commitlog/00000000001073741824          the second 1 GiB commit log segment
    consumequeue/T/0/00000000000006000000   the second 6,000,000-byte consume queue file

Positions are byte offsets within the file:

    0 <= flushed_position <= committed_position <= written_position <= size_bytes

Readers see bytes below `read_position` only.  Syncs use os.fdatasync, which releases the
GIL (`mmap.flush()` holds it for the whole msync: 126 ms stalls per 256 MiB were measured).

Reference counting (RocketMQ `ReferenceResource`): the creator holds one reference; a reader
`hold()`s before touching the mapping and `release()`s after.  `close()` drops the creator's
reference; the mapping is closed (and the file deleted, if asked) only when the last holder
releases, so a file a reader holds is never unmapped under it.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from pathlib import Path
from typing import Self

from ..config import PAGE_SIZE_BYTES, PreallocateMethod
from ..errors import StoreFormatError
from ..format.volume import offset_file_name, parse_offset_file_name
from .io import fsync_directory, map_existing, publish_prepared
from .preallocate import prepare_file, prepare_mapping, zero_fill


class MappedFile:
    """A file and its mapping.  Positions are relative to `start_position`."""

    SIZE_SETTING = "the file size"
    """The setting that fixes this kind of file's size (named in errors)."""

    def __init__(self, *, path: Path, start_position: int, size_bytes: int, fd: int,
                 mapping: mmap.mmap) -> None:
        assert start_position % size_bytes == 0, "files start at multiples of their size"
        assert len(mapping) == size_bytes
        self.path = path
        self.start_position = start_position
        self.size_bytes = size_bytes
        self.fd = fd
        self.mapping = mapping
        self.written_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self._references = 1
        self._available = True
        self._closed = False
        self._delete_on_close = False
        self._reference_lock = threading.Lock()

    # -- creation --------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, *, creating: Path, start_position: int, size_bytes: int,
               method: PreallocateMethod, warmup: bool,
               allocate_bytes: int | None = None) -> Self:
        """Create, preallocate and map a new file (the allocator's thread runs this for
        segments, dispatch for consume queue files).

        The file is prepared as `creating` (in the store's `creating/` directory), its size
        and blocks synced (before the warm-up dirties zero pages, which need no writing: a
        preallocated block reads as zeros), then renamed into place and the name synced
        (io.publish_prepared): a crash or a power loss never leaves a file of the wrong size,
        or a name without its file, under a 20-digit name.  `allocate_bytes` (FALLOCATE
        only): reserve and warm up only that much; the rest stays a hole.
        """
        path = directory / offset_file_name(start_position)
        creating.unlink(missing_ok=True)
        fd = os.open(creating, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            prepare_file(fd, size_bytes, method, allocate_bytes=allocate_bytes)
            os.fdatasync(fd)
            mapping = mmap.mmap(fd, size_bytes, mmap.MAP_SHARED)
            prepare_mapping(fd, mapping, method, warmup=warmup, warmup_bytes=allocate_bytes)
            publish_prepared(creating=creating, path=path)
        except BaseException:
            os.close(fd)
            creating.unlink(missing_ok=True)
            raise
        return cls(path=path, start_position=start_position, size_bytes=size_bytes, fd=fd,
                   mapping=mapping)

    @classmethod
    def open_existing(cls, path: Path, *, size_bytes: int) -> Self:
        start_position = parse_offset_file_name(path.name)
        if start_position is None:
            raise StoreFormatError(f"{path}: not a file name of 20 decimal digits")
        if start_position % size_bytes:
            raise StoreFormatError(f"{path}: start position {start_position} is not a multiple "
                                   f"of {cls.SIZE_SETTING}={size_bytes}")
        fd, mapping = map_existing(path, size_bytes=size_bytes, wrong_size=lambda actual: (
            StoreFormatError(f"{path}: {actual} bytes, but {cls.SIZE_SETTING} is {size_bytes}; "
                             f"open the store with the sizes it was written with")))
        opened = cls(path=path, start_position=start_position, size_bytes=size_bytes, fd=fd,
                      mapping=mapping)
        opened.set_positions(size_bytes)
        return opened

    # -- positions -----------------------------------------------------------------------
    @property
    def read_position(self) -> int:
        return self.written_position

    @property
    def end_position(self) -> int:
        return self.start_position + self.size_bytes

    @property
    def is_full(self) -> bool:
        return self.written_position == self.size_bytes

    def set_positions(self, position: int) -> None:
        """Recovery: everything below `position` is written, committed and flushed."""
        assert 0 <= position <= self.size_bytes
        self.written_position = position
        self.committed_position = position
        self.flushed_position = position

    def truncate(self, position: int, *, written_end: int | None = None) -> None:
        """Recovery: drop everything from `position` on, zeroing what was written there (up
        to `written_end`, where the caller knows nothing non-zero follows; else it is looked
        for), so that no stale record past the new end can ever be read back as valid after
        a later crash."""
        assert 0 <= position <= self.size_bytes
        end = last_nonzero_end(self.mapping, position) if written_end is None else written_end
        if end > position:
            zero_fill(self.fd, position, end)
            os.fdatasync(self.fd)
        self.set_positions(position)

    # -- flush ---------------------------------------------------------------------------
    def flush(self, *, pages_min: int, end_position: int | None = None) -> bool:
        """fdatasync the file if enough is unflushed; True if the flushed position moved.
        `end_position` caps what counts as flushed (a sealed group's end; the sync itself
        writes every dirty page of the file)."""
        readable = self.read_position
        if end_position is not None:
            readable = min(readable, end_position)
        flushed = self.flushed_position
        if not able_to_sync(done=flushed, current=readable, full=readable == self.size_bytes,
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
            with contextlib.suppress(FileNotFoundError):  # the directory went too
                fsync_directory(self.path.parent)  # or a power loss brings the file back

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.path.name}, written={self.written_position}, "
                f"committed={self.committed_position}, flushed={self.flushed_position})")


def able_to_sync(*, done: int, current: int, full: bool, pages_min: int) -> bool:
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
