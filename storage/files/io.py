"""Small filesystem helpers shared by the on-disk structures."""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from pathlib import Path


def fsync_directory(directory: Path) -> None:
    """Make a created, renamed or removed name durable (the entry lives in the directory)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def map_existing(path: Path, *, size_bytes: int,
                 wrong_size: Callable[[int], Exception]) -> tuple[int, mmap.mmap]:
    """Open `path` read-write and map it whole; a file of another size raises
    `wrong_size(actual_bytes)`.  Returns (fd, mapping); nothing leaks on failure."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        actual_bytes = os.fstat(fd).st_size
        if actual_bytes != size_bytes:
            raise wrong_size(actual_bytes)
        return fd, mmap.mmap(fd, size_bytes, mmap.MAP_SHARED)
    except BaseException:
        os.close(fd)
        raise
