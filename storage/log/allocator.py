"""The segment allocator: creates the next segment files in the background.

RocketMQ `AllocateMappedFileService`: when the put path needs segment N it also asks for
N+1, so that the next roll finds a file already created, preallocated and mapped.  The
put path waits at most `allocate_wait_ms` for the one it needs.
"""

from __future__ import annotations

import collections
import errno
import logging
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from ..config import StoreConfig
from ..errors import SegmentCreateError, StoreClosedError
from ..files.io import make_directories
from ..files.segment import CommitLogSegment
from ..format.volume import (
    COMMITLOG_DIRECTORY,
    CREATING_DIRECTORY,
    creating_name,
    offset_file_name,
)

log = logging.getLogger(__name__)


class DiskFullError(SegmentCreateError):
    """Creating a segment failed for lack of space (ENOSPC / EDQUOT)."""


class SegmentAllocator:
    """One thread; requests are served in position order."""

    def __init__(self, directory: Path, config: StoreConfig) -> None:
        self._directory = directory
        self._config = config
        self._pending: dict[int, Future[CommitLogSegment]] = {}
        self._requests: collections.deque[int] = collections.deque()
        self._condition = threading.Condition()
        self._closed = False
        self.segments_created_total = 0
        self.create_seconds_total = 0.0
        """Wall time spent in `CommitLogSegment.create` (written by the thread, see stats.py)."""
        self._thread = threading.Thread(target=self._run, name="mqstore-allocator", daemon=True)
        self._thread.start()

    def take(self, start_position: int) -> CommitLogSegment:
        """The segment starting at `start_position`, created now or earlier; also asks for
        the ones after it.  Raises `SegmentCreateError` (or `DiskFullError`)."""
        future = self._request(start_position)
        for ahead in range(1, self._config.preallocate_ahead_count + 1):
            self._request(start_position + ahead * self._config.segment_size_bytes)
        try:
            segment = future.result(timeout=self._config.allocate_wait_ms / 1000)
        except FutureTimeout:
            raise SegmentCreateError(f"segment at {start_position} not ready after "
                                     f"{self._config.allocate_wait_ms} ms "
                                     f"(allocate_wait_ms)") from None
        with self._condition:
            self._pending.pop(start_position, None)
        return segment

    def prepare(self, start_position: int) -> None:
        """Start creating the segment at `start_position` now, without waiting for it."""
        self._request(start_position)

    def _request(self, start_position: int) -> Future[CommitLogSegment]:
        with self._condition:
            if self._closed:
                raise StoreClosedError("the segment allocator is closed")
            future = self._pending.get(start_position)
            if future is None or (future.done() and future.exception() is not None):
                future = Future()
                self._pending[start_position] = future
                self._requests.append(start_position)
                self._condition.notify()
            return future

    def close(self) -> None:
        """Stop the thread; segments made ahead but never taken are closed (their files stay,
        preallocated, and recovery removes them)."""
        with self._condition:
            self._closed = True
            self._condition.notify()
        self._thread.join()
        for future in self._pending.values():
            if future.done() and future.exception() is None:
                future.result().close()
            else:
                future.cancel()
        self._pending.clear()

    def _creating(self, start_position: int) -> Path:
        """Where the segment is prepared: the store's `creating/` (format/volume.py)."""
        directory = self._directory.parent / CREATING_DIRECTORY
        make_directories(directory, root=self._directory.parent)
        return directory / creating_name(COMMITLOG_DIRECTORY, offset_file_name(start_position))

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._requests and not self._closed:
                    self._condition.wait()
                if self._closed:
                    return
                start_position = self._requests.popleft()
                future = self._pending.get(start_position)
            if future is None or not future.set_running_or_notify_cancel():
                continue
            started_s = time.perf_counter()
            try:
                segment = CommitLogSegment.create(
                    self._directory, creating=self._creating(start_position),
                    start_position=start_position,
                    size_bytes=self._config.segment_size_bytes,
                    method=self._config.effective_preallocate_method,
                    warmup=self._config.segment_warmup_enabled)
            except OSError as error:
                log.error("creating segment %d failed: %s", start_position, error)
                wrapped: SegmentCreateError
                if error.errno in (errno.ENOSPC, errno.EDQUOT):
                    wrapped = DiskFullError(f"disk full creating segment {start_position}: "
                                            f"{error}")
                else:
                    wrapped = SegmentCreateError(f"creating segment {start_position}: {error}")
                future.set_exception(wrapped)
            else:
                self.create_seconds_total += time.perf_counter() - started_s
                self.segments_created_total += 1
                future.set_result(segment)
