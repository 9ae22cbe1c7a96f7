"""The dispatch doorbell: how the writer process wakes the indexer process when the log moves.

A Unix datagram socket in Linux's abstract namespace, named after the store directory's
identity (no file on the volume, nothing left behind by a crash):

    name  "\\0mqstore-dispatch-<st_dev hex>-<st_ino hex>"  of the store directory

Every process that opens the same directory finds the same name: the writer and indexer
processes of `mqstore up`, and the writer and indexer containers of a Broker's pod (they
share the pod's network namespace, which holds abstract names, and the volume's inode).

    writer (`Doorbell.ring`, after a publish of `positions` that moved the committed position)
        an empty datagram, non-blocking: a full queue means rings are pending already
        (nothing lost); no listener (ECONNREFUSED, ENOENT) means no indexer listens, and
        costs one system call
    indexer (`DoorbellReceiver`, waited on by the dispatch thread itself)
        blocks until a datagram arrives or its poll interval passes, and reads every pending
        one (many rings, one wake-up); the indexer's own wakeups are rings too

Without it the indexer would have to poll `positions` every millisecond to see a put within a
millisecond: ~10% of a core on an idle store.  With it, dispatch starts a pass as soon as
the writer publishes, and polls only every `dispatch_doorbell_poll_ms`.  The doorbell is a
hint: a lost ring, another process holding the name, or a writer of an older version costs
latency up to that poll, never a message, and a stranger's rings cost only extra passes.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import socket
from pathlib import Path

log = logging.getLogger(__name__)

_NO_LISTENER = (errno.ECONNREFUSED, errno.ENOENT)
_RINGS_READ_MAX = 4096
"""Pending rings drained per wake-up before `on_ring` (the rest wake it once more)."""


def doorbell_name(directory: Path) -> bytes:
    """The abstract socket name of the store at `directory`."""
    status = os.stat(directory)
    return f"\0mqstore-dispatch-{status.st_dev:x}-{status.st_ino:x}".encode()


class Doorbell:
    """The writer's end.  `ring` never blocks and never raises for a missing listener."""

    def __init__(self, directory: Path) -> None:
        self.name = doorbell_name(directory)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._socket.setblocking(False)
        self.rings_total = 0
        """Rings a listener received or had pending (not counted: no listener)."""

    def ring(self) -> None:
        try:
            self._socket.sendto(b"", self.name)
        except BlockingIOError:
            pass  # the listener's queue is full: it has rings to read already
        except OSError as error:
            if error.errno in _NO_LISTENER:
                return
            raise
        self.rings_total += 1

    def close(self) -> None:
        self._socket.close()


class DoorbellReceiver:
    """The indexer's end: binds the store's name; the dispatch thread waits on it
    (`wait`), so a ring wakes that thread itself, with no thread between.  In-process
    wakeups (`wake`) are rings from within.  `open` returns None (and logs why) when the
    name cannot be bound."""

    def __init__(self, bound: socket.socket) -> None:
        bound.setblocking(False)
        self._socket = bound
        self._name = bound.getsockname()
        self._poll = select.poll()
        self._poll.register(bound, select.POLLIN)
        self._waker = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._waker.setblocking(False)

    @classmethod
    def open(cls, directory: Path) -> DoorbellReceiver | None:
        bound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            bound.bind(doorbell_name(directory))
        except OSError as error:
            bound.close()
            log.warning("no dispatch doorbell for %s (%s): dispatch polls `positions` instead",
                        directory, error.strerror or error)
            return None
        return cls(bound)

    def wait(self, timeout_ms: int) -> bool:
        """Block until a ring or `timeout_ms`; read every pending ring (many rings, one
        wake-up); True if rung.  One thread waits at a time (the dispatch thread)."""
        if not self._poll.poll(timeout_ms):
            return False
        receiver = self._socket
        try:
            for _ in range(_RINGS_READ_MAX):
                receiver.recv(1)
        except BlockingIOError:
            pass  # drained
        return True

    def pending(self) -> bool:
        """Whether a ring waits unread."""
        return bool(self._poll.poll(0))

    def wake(self) -> None:
        """Ring from this process (any thread); a full queue is a pending ring, and a
        receiver already closed has no thread left to wake."""
        with contextlib.suppress(OSError):
            self._waker.sendto(b"", self._name)

    def close(self) -> None:
        self._waker.close()
        self._socket.close()
