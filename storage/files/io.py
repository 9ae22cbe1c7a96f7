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


def make_directories(path: Path, *, root: Path) -> None:
    """Create `path` and its missing parents below `root`, each entry synced into its parent
    (a consume queue file in a directory whose name a power loss forgot is lost with it)."""
    missing: list[Path] = []
    current = path
    while current != root and not current.is_dir():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            continue  # another thread made it meanwhile: its creator syncs the parent
        fsync_directory(directory.parent)


def make_directories_durably(path: Path) -> None:
    """`make_directories` up from the nearest directory that exists: a store directory the
    first open creates holds synced data, so its own name must be durable too."""
    make_directories(path, root=Path(path.anchor) if path.is_absolute() else Path("."))


def publish_prepared(*, creating: Path, path: Path) -> None:
    """Give a prepared file, already synced (its size and blocks), its final name, and sync
    the name: after a power loss the final name holds the whole prepared file or does not
    exist."""
    os.rename(creating, path)
    fsync_directory(path.parent)


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
