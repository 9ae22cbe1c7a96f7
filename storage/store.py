"""`MessageStore`: the facade that opens a directory, recovers it and runs the services.

    <directory>/commitlog/<20-digit start position>   segments
    <directory>/checkpoint                            synced watermarks
    <directory>/lock                                  single-writer lock
    <directory>/abort                                 present while open (unclean if found)

Open order: lock → read abort marker and checkpoint → load segments → recover → allocate the
pool → start allocator, commit and flush services → create the abort marker.  Close runs it
backwards and removes the abort marker only if every service drained cleanly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType

from . import record
from .allocator import SegmentAllocator
from .checkpoint import Checkpoint
from .commitlog import CommitLog
from .config import StoreConfig
from .errors import StoreClosedError, StoreError
from .flush import AsyncFlushService, CommitService, GroupCommitService
from .lockfile import AbortMarker, StoreLock
from .message import Message, PutResult, PutStatus, StoredMessage, decode_stored
from .pool import TransientStorePool
from .recovery import RecoveryReport, plan_recovery, recover
from .segment import CommitLogSegment
from .segment_queue import SegmentQueue
from .service_thread import ServiceThread

log = logging.getLogger(__name__)

COMMITLOG_DIRECTORY = "commitlog"


class NoRecordError(StoreError, LookupError):
    """No readable record starts at the given physical offset."""


class MessageStore:
    """An open store.  Use `MessageStore.open(directory, config)`; close with `close()`."""

    def __init__(self, directory: Path, config: StoreConfig, *, lock: StoreLock,
                 abort: AbortMarker, checkpoint: Checkpoint, queue: SegmentQueue,
                 report: RecoveryReport, queue_offsets: dict[tuple[str, int], int]) -> None:
        self.directory = directory
        self.config = config
        self.recovery_report = report
        self._lock = lock
        self._abort = abort
        self._checkpoint = checkpoint
        self._queue = queue
        self._closed = False
        self._failure: str | None = None
        self._last_checkpoint_ms = 0.0
        self.pool = (TransientStorePool(buffer_count=config.pool_buffer_count,
                                        buffer_size_bytes=config.segment_size_bytes,
                                        lock_memory=config.pool_lock_memory)
                     if config.pool_enabled else None)
        self._allocator = SegmentAllocator(queue.directory, config)
        self._commitlog = CommitLog(queue, config, allocator=self._allocator, pool=self.pool,
                                    queue_offsets=queue_offsets)
        last = queue.last
        if last is None or last.is_full:  # have the first segment ready before the first put
            self._allocator.prepare(last.end_position if last else queue.min_position)
        self._services: list[ServiceThread] = []
        self._commit_service: CommitService | None = None
        self._group_commit: GroupCommitService | None = None
        self._start_services()

    # -- open and close --------------------------------------------------------------------
    @classmethod
    def open(cls, directory: str | Path, config: StoreConfig | None = None) -> MessageStore:
        config = config or StoreConfig()
        directory = Path(directory)
        (directory / COMMITLOG_DIRECTORY).mkdir(parents=True, exist_ok=True)
        lock = StoreLock(directory / "lock")
        lock.acquire()
        try:
            abort = AbortMarker(directory / "abort")
            checkpoint = Checkpoint(directory / "checkpoint")
            queue = SegmentQueue(directory / COMMITLOG_DIRECTORY,
                                 segment_size_bytes=config.segment_size_bytes,
                                 pooled=config.pool_enabled)
            try:
                queue.load()
                report = plan_recovery(queue.segments, abort_present=abort.present,
                                       checkpoint_state=checkpoint.state,
                                       checkpoint=checkpoint.values,
                                       recovery_segments_max=config.recovery_segments_max)
                queue_offsets: dict[tuple[str, int], int] = {}
                recover(queue, report, queue_offsets)
            except BaseException:
                queue.close()
                checkpoint.close()
                raise
            queue.last_store_timestamp_ms = report.last_store_timestamp_ms
            queue.committed_store_timestamp_ms = report.last_store_timestamp_ms
            queue.flushed_store_timestamp_ms = report.last_store_timestamp_ms
            store = cls(directory, config, lock=lock, abort=abort, checkpoint=checkpoint,
                        queue=queue, report=report, queue_offsets=queue_offsets)
        except BaseException:
            lock.release()
            raise
        abort.create()
        log.info("opened %s: recovery %s, log [%d, %d)", directory, report.mode.value,
                 queue.min_position, queue.max_position)
        return store

    def _start_services(self) -> None:
        config, queue = self.config, self._queue
        if self.pool is not None:
            self._commit_service = CommitService(queue, self.pool, config,
                                                 on_fatal=self._on_fatal)
            self._services.append(self._commit_service)
            self._commitlog.after_append = self._commit_service.wakeup
        if config.flush_sync:
            commit = self._commit_service.commit_now if self._commit_service else None
            self._group_commit = GroupCommitService(queue, config, commit=commit,
                                                    on_flushed=self._on_flushed,
                                                    on_fatal=self._on_fatal)
            self._services.append(self._group_commit)
        else:
            self._services.append(AsyncFlushService(queue, config, on_flushed=self._on_flushed,
                                                    on_fatal=self._on_fatal))
        for service in self._services:
            service.start()

    def close(self) -> None:
        """Drain commit and flush, persist the checkpoint, release the lock.  The abort
        marker is removed only when everything drained (a failed store stays 'unclean')."""
        if self._closed:
            return
        self._closed = True
        self._commitlog.refused_reason = self._commitlog.refused_reason or "store is closed"
        for service in self._services:  # commit first, then flush: the creation order
            service.stop()
        self._allocator.close()
        clean = self._failure is None
        if clean:
            self._on_flushed(force=True)
        self._queue.close()
        self._checkpoint.close()
        if self.pool is not None:
            self.pool.close()
        if clean:
            self._abort.remove()
        self._lock.release()

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # -- put ----------------------------------------------------------------------------
    def put(self, message: Message) -> PutResult:
        result = self._commitlog.put(message)
        if self._group_commit is not None and result.status is PutStatus.PUT_OK:
            self._wait_synced(result.physical_offset + result.size_bytes, [result])
        return result

    def put_batch(self, messages: Sequence[Message]) -> list[PutResult]:
        results = self._commitlog.put_batch(messages)
        if results and results[-1].status is PutStatus.PUT_OK and self._group_commit:
            last = results[-1]
            self._wait_synced(last.physical_offset + last.size_bytes, results)
        return results

    def submit(self, message: Message) -> Future[PutResult]:
        """`put` for callers that must not block (an event loop): the future completes once
        the put is acknowledged, i.e. at once under async flush, after the group commit's
        sync under sync flush.  Bridge to asyncio with `asyncio.wrap_future`."""
        result = self._commitlog.put(message)
        future: Future[PutResult] = Future()
        if self._group_commit is None or result.status is not PutStatus.PUT_OK:
            future.set_result(result)
            return future
        self._submit_synced(result.physical_offset + result.size_bytes, [result],
                            lambda: future.set_result(result))
        return future

    def submit_batch(self, messages: Sequence[Message]) -> Future[list[PutResult]]:
        """`put_batch` without blocking; see `submit`."""
        results = self._commitlog.put_batch(messages)
        future: Future[list[PutResult]] = Future()
        if self._group_commit is None or not results or results[-1].status is not PutStatus.PUT_OK:
            future.set_result(results)
            return future
        last = results[-1]
        self._submit_synced(last.physical_offset + last.size_bytes, results,
                            lambda: future.set_result(results))
        return future

    def _submit_synced(self, end_position: int, results: list[PutResult],
                       resolve: Callable[[], None]) -> None:
        assert self._group_commit is not None

        def on_done(synced: bool) -> None:
            if not synced:
                self._mark_not_synced(results)
            resolve()

        if not self._group_commit.submit(end_position,
                                         timeout_s=self.config.sync_flush_timeout_ms / 1000,
                                         on_done=on_done):
            on_done(False)

    def _mark_not_synced(self, results: list[PutResult]) -> None:
        reason = (self._failure or f"not synced within {self.config.sync_flush_timeout_ms} ms "
                                   f"(sync_flush_timeout_ms)")
        for result in results:
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
            result.reason = reason

    def _wait_synced(self, end_position: int, results: list[PutResult]) -> None:
        assert self._group_commit is not None
        timeout_s = self.config.sync_flush_timeout_ms / 1000
        if not self._group_commit.wait_flushed(end_position, timeout_s=timeout_s):
            self._mark_not_synced(results)

    # -- read ---------------------------------------------------------------------------
    def message_at(self, physical_offset: int) -> StoredMessage:
        """Decode the record starting at `physical_offset` (RocketMQ `lookMessageByOffset`)."""
        self._check_open()
        segment = self._queue.find(physical_offset)
        if segment is None or not segment.hold():
            raise NoRecordError(f"no segment holds physical offset {physical_offset} "
                                f"(log is [{self.min_position}, {self.max_position}))")
        try:
            position = physical_offset - segment.start_position
            check = record.check_record(segment.mapping, position, limit=segment.read_position,
                                        expected_physical_offset=physical_offset,
                                        verify_crc=False)
            if check.status is not record.RecordCheck.OK:
                raise NoRecordError(f"no record starts at physical offset {physical_offset}: "
                                    f"{check.reason or check.status.value}")
            return decode_stored(segment.mapping, position)
        finally:
            segment.release()

    def iter_messages(self, start_position: int | None = None) -> Iterator[StoredMessage]:
        """Every record from `start_position` (a record start; default: the log's start) to
        the readable end, in physical order, BLANK records skipped."""
        self._check_open()
        position = self.min_position if start_position is None else start_position
        end = self.max_position
        while position < end:
            segment = self._queue.find(position)
            if segment is None or not segment.hold():
                return
            try:
                position = yield from _segment_messages(segment, position, end)
            finally:
                segment.release()

    # -- state --------------------------------------------------------------------------
    @property
    def min_position(self) -> int:
        return self._queue.min_position

    @property
    def max_position(self) -> int:
        """Exclusive end of the readable log (committed bytes with the pool on)."""
        return self._queue.max_position

    @property
    def wrote_position(self) -> int:
        return self._queue.wrote_position

    @property
    def committed_position(self) -> int:
        return self._queue.committed_where if self.pool is not None else self.wrote_position

    @property
    def flushed_position(self) -> int:
        return self._queue.flushed_where

    @property
    def segment_count(self) -> int:
        return len(self._queue.segments)

    @property
    def pool_free_count(self) -> int | None:
        return self.pool.free_count if self.pool is not None else None

    @property
    def failure(self) -> str | None:
        """Why the store stopped accepting writes (a failed sync), or None."""
        return self._failure

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        return self._commitlog.queue_offsets.get((topic, queue_id), 0)

    # -- internals ----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self.directory}: store is closed")

    def _on_fatal(self, service: str, error: BaseException) -> None:
        self._failure = f"{service} failed: {error!r}"
        self._commitlog.refused_reason = f"store stopped: {self._failure}"
        if self._group_commit is not None:
            self._group_commit.fail_all()

    def _on_flushed(self, *, force: bool = False) -> None:
        """Persist the checkpoint at most every `checkpoint_interval_ms` (and on close)."""
        now_ms = time.monotonic() * 1000
        if not force and now_ms - self._last_checkpoint_ms < self.config.checkpoint_interval_ms:
            return
        self._last_checkpoint_ms = now_ms
        values = self._checkpoint.values
        values.physic_msg_timestamp_ms = self._queue.flushed_store_timestamp_ms
        # Until consume queues exist the log is the only structure recovery rebuilds from,
        # so the queues' watermark is the log's.
        values.logics_msg_timestamp_ms = values.physic_msg_timestamp_ms
        values.master_flushed_offset = self._queue.flushed_where
        self._checkpoint.write()


def _segment_messages(segment: CommitLogSegment, position: int,
                      end: int) -> Generator[StoredMessage, None, int]:
    """Yield the records of one held segment from `position`; return where the scan ended."""
    limit = min(segment.read_position, end - segment.start_position)
    relative = position - segment.start_position
    while relative < limit:
        physical = segment.start_position + relative
        check = record.check_record(segment.mapping, relative, limit=segment.size_bytes,
                                    expected_physical_offset=physical, verify_crc=False)
        if check.status is record.RecordCheck.OK:
            yield decode_stored(segment.mapping, relative)
            relative += check.size_bytes
        elif check.status is record.RecordCheck.BLANK:
            return segment.end_position
        else:
            raise NoRecordError(f"{segment.path}: unreadable record at physical offset "
                                f"{physical}: {check.reason or check.status.value}")
    return segment.start_position + relative

