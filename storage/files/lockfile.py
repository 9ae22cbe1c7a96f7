"""The single-writer `lock` file and the `abort` (unclean shutdown) marker.

`lock`: an exclusive POSIX record lock on its first byte, as RocketMQ's
`FileChannel.tryLock(0, 1, false)` takes it, so an mqstore writer and a RocketMQ broker
exclude each other too.  POSIX locks belong to the process, so a second open in the same
process would not be refused by the kernel: a process-wide registry refuses that as well.
The file holds the holder's pid, named in the error a second writer gets.

`abort`: created once the store is open for writing, removed by a clean close.  Present at
open means the last writer did not close cleanly.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from ..errors import StoreLockedError
from .io import fsync_directory

_locked_in_process: set[str] = set()
_registry_lock = threading.Lock()


class StoreLock:
    """Held from `acquire` to `release`; refuses a second writer on the same directory."""

    def __init__(self, path: Path, *, holder_role: str = "writer",
                 lock_name: str = "store lock") -> None:
        """`holder_role` and `lock_name` name who takes this lock in the refusal ("writer",
        "store lock"; "indexer", "indexer lock"), so a second indexer is not told that a
        writer is in its way."""
        self.path = path
        self._holder_role = holder_role
        self._lock_name = lock_name
        self._key = str(path.resolve())
        self._fd: int | None = None

    def acquire(self) -> None:
        with _registry_lock:
            if self._key in _locked_in_process:
                raise StoreLockedError(f"{self.path}: this process already has the store "
                                       f"open (it holds the {self._lock_name})")
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError:
                holder = _read_holder(fd)
                os.close(fd)
                raise StoreLockedError(f"{self.path}: another {self._holder_role} holds "
                                       f"the {self._lock_name} ({holder}); only one "
                                       f"{self._holder_role} may run on a store directory"
                                       ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"lock pid={os.getpid()}\n".encode(), 0)
            self._fd = fd
            _locked_in_process.add(self._key)

    def release(self) -> None:
        with _registry_lock:
            if self._fd is None:
                return
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
            os.close(self._fd)
            self._fd = None
            _locked_in_process.discard(self._key)


def _read_holder(fd: int) -> str:
    text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    return text or "holder unknown"


class AbortMarker:
    """The `abort` file: its presence at open means the previous writer crashed."""

    def __init__(self, path: Path, *, holder_role: str = "writer",
                 lock_name: str = "store lock") -> None:
        """`holder_role` and `lock_name` name who takes this lock in the refusal ("writer",
        "store lock"; "indexer", "indexer lock"), so a second indexer is not told that a
        writer is in its way."""
        self.path = path
        self._holder_role = holder_role
        self._lock_name = lock_name

    @property
    def present(self) -> bool:
        return self.path.exists()

    def create(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        os.fsync(fd)
        os.close(fd)
        fsync_directory(self.path.parent)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        fsync_directory(self.path.parent)

