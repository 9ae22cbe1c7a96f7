"""The race API of the 2021 Tianchi race: `append` and `get_range` on top of
`put` and `get`, as an opt-in wrapper around a `MessageStore`:

    with RaceStore.open("./data", StoreConfig(flush_mode=FlushMode.SYNC)) as race:
        race.append("topic1", 7, b"payload")      # 0, 1, 2, ... per queue, once synced
        race.get_range("topic1", 7, 0, 100)       # {0: b"payload"}
        race.store                                # the MessageStore underneath

    append(topic, queue_id, data) -> int
        A put of `Message(topic, queue_id, data)` under sync flush: returns the queue offset
        (0, 1, 2, ... per queue) only once the group commit synced the record.  Concurrent
        appenders share group syncs (`GroupCommitService`), 4 KiB-aligned with
        `group_commit_align_bytes=4096`.  Any other outcome raises `AppendError`.

    get_range(topic, queue_id, offset, fetch_num) -> dict[int, bytes]
        The bodies of offsets [offset, end), end = min(offset + fetch_num, the next offset
        the writer assigned), keyed 0..n-1 in order; {} at or past the end.

Read-your-writes: an offset `append` returned may not be in the consume queue yet (dispatch
runs in the background).  `get_range` then wakes dispatch and waits on a condition that the
dispatch listener notifies after every pass that advanced a queue, for at most
`range_read_wait_ms` (then `RangeReadTimeoutError`: dispatch is stalled).

With `read_cache_enabled`, appended data is copied into the `ReadCache` once durable; a
`get_range` takes what the cache holds, reads the rest from the log with `get`, and (with
`read_cache_prefetch_enabled`) queues a background load of the next range [end,
end + fetch_num) for the reader's next call.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import TracebackType

from ..config import StoreConfig
from ..dispatch.dispatcher import Listener, QueueNotices
from ..errors import StoreError
from ..format.message import Message, PutStatus
from ..reads.get import GetStatus
from ..store import MessageStore
from ..store_sizes import embedded_config
from .read_cache import PrefetchService, ReadCache


class AppendError(StoreError):
    """`append` did not end PUT_OK: `status` (a `PutStatus`) and `reason` say why.  With
    FLUSH_DISK_TIMEOUT the data was written but its sync was not seen: it may survive."""

    def __init__(self, status: PutStatus, reason: str) -> None:
        super().__init__(f"append failed: {status.name}: {reason}")
        self.status = status
        self.reason = reason


class RangeReadTimeoutError(StoreError):
    """`get_range` waited `range_read_wait_ms` for dispatch to reach offsets the writer had
    already assigned (dispatch is stalled or far behind); the message says where it stands."""


class RaceStore:
    """A `MessageStore` opened with the race API: use `RaceStore.open(directory, config)`."""

    def __init__(self, directory: Path, config: StoreConfig, *,
                 listener: Listener | None) -> None:
        self._config = config
        self._wait_s = config.range_read_wait_ms / 1000
        self._dispatched = threading.Condition()
        self._user_listener = listener
        self.store = MessageStore.open(directory, config, listener=self._on_dispatched)
        self._wake_dispatch = self.store.wake_dispatch if config.dispatch_enabled else None
        self.cache = (ReadCache(capacity_bytes=config.read_cache_capacity_bytes,
                                size_classes_bytes=config.read_cache_size_classes_bytes)
                      if config.read_cache_enabled else None)
        self.prefetch: PrefetchService | None = None
        self.prefetch_failure: str | None = None
        """Why the prefetch thread stopped, or None (reads go on without it)."""
        if self.cache is not None and config.read_cache_prefetch_enabled:
            self.prefetch = PrefetchService(
                self.cache, load=self._load, on_fatal=self._on_prefetch_failed,
                pending_max=config.read_cache_prefetch_pending_max)
            self.prefetch.start()

    @classmethod
    def open(cls, directory: str | Path, config: StoreConfig | None = None, *,
             listener: Listener | None = None) -> RaceStore:
        """Open the store in `directory` for the race API; `listener` also gets the
        dispatch notices (after waiting `get_range`s are woken)."""
        return cls(Path(directory), config or embedded_config(Path(directory)), listener=listener)

    def _on_dispatched(self, notices: QueueNotices) -> None:
        """The dispatch listener: wake waiting `get_range`s, then the caller's listener."""
        with self._dispatched:
            self._dispatched.notify_all()
        if self._user_listener is not None:
            self._user_listener(notices)

    def _on_prefetch_failed(self, service: str, error: BaseException) -> None:
        self.prefetch_failure = f"{service} failed: {error!r}"

    def close(self) -> None:
        """Stop the prefetch thread (first: it reads through the store), then the store."""
        if self.prefetch is not None:
            self.prefetch.stop()
        self.store.close()

    def __enter__(self) -> RaceStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # -- append ------------------------------------------------------------------------------
    def append(self, topic: str, queue_id: int, data: bytes | bytearray | memoryview) -> int:
        if not self._config.flush_sync:
            raise StoreError("append returns an offset only once the data is durable, which "
                             "needs flush_mode=FlushMode.SYNC (group commit); this store runs "
                             "async flush")
        result = self.store.put(Message(topic, queue_id, data))  # type: ignore[arg-type]
        if result.status is not PutStatus.PUT_OK:
            raise AppendError(result.status, result.reason)
        if self.cache is not None:
            self.cache.put(topic, queue_id, result.queue_offset, data)
        return result.queue_offset

    # -- get_range ---------------------------------------------------------------------------
    def get_range(self, topic: str, queue_id: int, offset: int,
                  fetch_num: int) -> dict[int, bytes]:
        _check_range(offset, fetch_num)
        if self._wake_dispatch is None:
            raise StoreError("get_range reads the consume queues, which this store does not "
                             "build (dispatch_enabled=false)")
        end = min(offset + fetch_num, self.store.next_queue_offset(topic, queue_id))
        if end <= offset:
            return {}
        bodies: list[bytes | None] = [None] * (end - offset)
        if self.cache is not None:
            for cached, data in self.cache.take(topic, queue_id, offset, end).items():
                bodies[cached - offset] = data
        missing = [offset + index for index, body in enumerate(bodies) if body is None]
        if missing:
            self._wait_dispatched(topic, queue_id, missing[-1] + 1)
            for start, stop in _runs(missing):
                self._read_log(topic, queue_id, start, stop, bodies, base=offset)
        if self.prefetch is not None and end < self.store.max_offset(topic, queue_id):
            self.prefetch.submit(topic, queue_id, end, end + fetch_num)
        result: dict[int, bytes] = {}
        for index, body in enumerate(bodies):
            assert body is not None
            result[index] = body
        return result

    def _wait_dispatched(self, topic: str, queue_id: int, end: int) -> None:
        """Until the consume queue holds every offset below `end`, bounded."""
        max_offset = self.store.max_offset
        if max_offset(topic, queue_id) >= end:
            return
        assert self._wake_dispatch is not None
        deadline = time.monotonic() + self._wait_s
        with self._dispatched:
            while max_offset(topic, queue_id) < end:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RangeReadTimeoutError(
                        f"{topic}/{queue_id}: dispatch did not reach offset {end - 1} within "
                        f"{self._config.range_read_wait_ms} ms (range_read_wait_ms); the "
                        f"consume queue ends at {max_offset(topic, queue_id)}")
                self._wake_dispatch()
                self._dispatched.wait(remaining)

    def _read_log(self, topic: str, queue_id: int, start: int, end: int,
                  bodies: list[bytes | None], *, base: int) -> None:
        """Copy the bodies of [start, end) from the log into `bodies[offset - base]`."""
        offset = start
        while offset < end:
            result = self.store.get(topic, queue_id, offset, end - offset)
            try:
                if result.status is not GetStatus.FOUND or result.next_offset <= offset:
                    raise StoreError(f"{topic}/{queue_id}: offset {offset} is not readable: "
                                     f"{result.status.value} (queue holds [{result.min_offset}"
                                     f", {result.max_offset}))")
                for message in result.messages:
                    assert offset <= message.queue_offset < end
                    bodies[message.queue_offset - base] = bytes(message.body)
                offset = result.next_offset
            finally:
                result.release()
        if any(body is None for body in bodies[start - base:end - base]):
            raise StoreError(f"{topic}/{queue_id}: offsets of [{start}, {end}) were skipped "
                             f"by the consume queue (removed by retention?)")

    def _load(self, topic: str, queue_id: int, start: int, end: int) -> dict[int, bytes]:
        """Prefetch: the bodies of [start, end) that are dispatched already (no waiting)."""
        end = min(end, self.store.max_offset(topic, queue_id))
        if end <= start:
            return {}
        bodies: list[bytes | None] = [None] * (end - start)
        self._read_log(topic, queue_id, start, end, bodies, base=start)
        return {start + index: body for index, body in enumerate(bodies) if body is not None}


def _check_range(offset: int, fetch_num: int) -> None:
    for name, value in (("offset", offset), ("fetch_num", fetch_num)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name}={value!r} must be an int")
        if value < 0:
            raise ValueError(f"{name}={value} must not be negative")


def _runs(offsets: list[int]) -> list[tuple[int, int]]:
    """Ascending offsets as contiguous [start, end) runs."""
    runs: list[tuple[int, int]] = []
    for offset in offsets:
        if runs and runs[-1][1] == offset:
            runs[-1] = (runs[-1][0], offset + 1)
        else:
            runs.append((offset, offset + 1))
    return runs
