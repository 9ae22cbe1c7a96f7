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
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from types import TracebackType

from .config import StoreConfig
from .dispatch.dispatcher import Dispatcher, DispatchService, Listener
from .dispatch.queue_flush import QueueFlushService
from .format.message import Message, PutResult
from .log.allocator import SegmentAllocator
from .log.commitlog import CommitLog
from .log.commitlog_reader import CommitLogReader
from .log.flush import AsyncFlushService, CommitService, GroupCommitService, GroupCommitStats
from .log.pool import TransientStorePool
from .log.publisher import PositionsPublisher, chain, positions_snapshot
from .log.retention import RetentionService
from .race.race import RaceApi
from .recovery.startup import OpenedStore, open_directory
from .replication.replica_sync import GroupTransferService
from .replication.replication import start_replication
from .roles import BrokerRole
from .service_thread import ServiceThread
from .stats import StoreStats
from .store_reads import StoreReads

log = logging.getLogger(__name__)

class MessageStore(StoreReads):
    """An open store.  Use `MessageStore.open(directory, config)`; close with `close()`.
    The read methods (`get`, `message_at`, `query_by_key`, ...) are in store_reads.py."""

    def __init__(self, directory: Path, config: StoreConfig, opened: OpenedStore) -> None:
        self.directory = directory
        self.config = config
        self.recovery_report = opened.report
        self._lock = opened.lock
        self._abort = opened.abort
        self._checkpoint = opened.checkpoint
        self._segment_list = opened.segment_list
        self._queues = opened.queues
        self._index = opened.index
        self._closed = False
        self._failure: str | None = None
        self._disk_full: str | None = None
        self._last_checkpoint_ms = 0.0
        self.pool = (TransientStorePool(buffer_count=config.pool_buffer_count,
                                        buffer_size_bytes=config.segment_size_bytes,
                                        lock_memory=config.pool_lock_memory)
                     if config.pool_enabled else None)
        self._allocator = SegmentAllocator(self._segment_list.directory, config)
        self._commitlog = CommitLog(self._segment_list, config, allocator=self._allocator,
                                    pool=self.pool, queue_offsets=opened.queue_offsets)
        last = self._segment_list.last
        # Have the next segment ready before the first put (an empty follower's log starts
        # where the master's does: only its first append knows where).
        if (last is not None and last.is_full) or (last is None and config.role.is_master):
            self._allocator.prepare(last.end_position if last else self._segment_list.min_position)
        self._reader = CommitLogReader(self._segment_list.directory,
                                       segment_size_bytes=config.segment_size_bytes)
        self._dispatcher = Dispatcher(self._reader, self._queues, index=self._index,
                                      dispatched_position=opened.dispatched_position,
                                      records_per_pass_max=config.dispatch_records_per_pass_max)
        self._services: list[ServiceThread] = []
        self._commit_service: CommitService | None = None
        self._group_commit: GroupCommitService | None = None
        self._transfer: GroupTransferService | None = None
        self._dispatch_service: DispatchService | None = None
        self._start_services()
        self.race = RaceApi(self, config, on_fatal=self._on_fatal, wake_dispatch=(
            self._dispatch_service.wakeup if self._dispatch_service is not None else None))
        """`append` / `get_range` (race.py), with `race.cache` the read cache if enabled."""

    # -- open and close --------------------------------------------------------------------
    @classmethod
    def open(cls, directory: str | Path, config: StoreConfig | None = None, *,
             listener: Listener | None = None) -> MessageStore:
        """Open (creating if needed) and recover the store in `directory`.  `listener` gets
        the batched "queue advanced" notices of in-process dispatch."""
        config = config or StoreConfig()
        directory = Path(directory)
        opened = open_directory(directory, config)
        try:
            store = cls(directory, config, opened)
        except BaseException:
            for close in (opened.segment_list.close, opened.queues.close, opened.checkpoint.close):
                close()
            if opened.index is not None:
                opened.index.close()
            opened.lock.release()
            raise
        if store._dispatch_service is not None:
            store._dispatch_service.listener = store.race.listener(listener)
        opened.abort.create()
        log.info("opened %s: recovery %s, log [%d, %d)", directory, opened.report.mode.value,
                 store.min_position, store.committed_position)
        return store

    def _start_services(self) -> None:
        config, segment_list = self.config, self._segment_list
        if self.pool is not None:
            self._commit_service = CommitService(segment_list, self.pool, config,
                                                 on_fatal=self._on_fatal)
            self._services.append(self._commit_service)
            self._commitlog.after_append = (
                self._commit_service.wake_if_rolled if config.role is BrokerRole.SYNC_MASTER
                else self._commit_service.wake_if_due)
        if config.flush_sync:
            commit = self._commit_service.commit_now if self._commit_service else None
            seal = self._commitlog.seal_group if config.group_commit_align_bytes else None
            # (config_checks: a follower never aligns, its log is the master's byte for byte)
            self._group_commit = GroupCommitService(segment_list, config, commit=commit, seal=seal,
                                                    on_flushed=self._on_flushed,
                                                    on_fatal=self._on_fatal)
            self._services.append(self._group_commit)
        else:
            self._services.append(AsyncFlushService(segment_list, config,
                                                    on_flushed=self._on_flushed,
                                                    on_fatal=self._on_fatal))
        self._start_replication()
        if config.dispatch_enabled:
            self._dispatch_service = DispatchService(
                self._dispatcher, config,
                committed_position=lambda: self._segment_list.committed_position,
                min_position=lambda: self._segment_list.min_position, listener=None,
                on_fatal=self._on_fatal)
            # RocketMQ's start() also waits for reput to catch up: reads after open see
            # every message recovered.
            self._dispatch_service.catch_up()
            self._services.append(self._dispatch_service)
        self._retention = RetentionService(
            segment_list, self._queues, self._index, config, on_disk_full=self._on_disk_full,
            on_min_position=self._reader.forget_before, on_fatal=self._on_fatal)
        self._services.append(self._retention)
        if config.positions_publish_enabled:
            self._start_publisher()
        self._services.append(QueueFlushService(
            self._queues, config,
            dispatched_store_timestamp_ms=lambda: self._dispatcher.last_store_timestamp_ms,
            on_thorough_flush=self._on_queues_flushed, on_fatal=self._on_fatal))
        for service in self._services:
            service.start()

    def _start_replication(self) -> None:
        """The role's part: followers' progress (masters), the group transfer (sync master)."""
        self.replication, self._acks, self._transfer = start_replication(
            self.config, segment_list=self._segment_list, commitlog=self._commitlog,
            commit_service=self._commit_service, group_commit=self._group_commit,
            failure=lambda: self._failure, on_fatal=self._on_fatal)
        """The writer service's replication server (masters) or client (follower) uses it."""
        if self._transfer is not None:
            self._services.append(self._transfer)
        if not self._acks.waits:
            # Nothing to wait for (async flush, no sync replication): the put is the commit
            # log's, without this class's frame (a fifth of a ~2.7 µs put, measured).
            self.put = self._commitlog.put  # type: ignore[method-assign]
            self.put_batch = self._commitlog.put_batch  # type: ignore[method-assign]
        self._update_refusal()

    def _start_publisher(self) -> None:
        publisher = PositionsPublisher(self.directory, self.config,
                                       snapshot=positions_snapshot(self._segment_list),
                                       recovered_end_position=self.committed_position,
                                       on_fatal=self._on_fatal)
        self._commitlog.after_append = chain(self._commitlog.after_append,
                                             lambda _end_position: publisher.wakeup())
        self._services.append(publisher)

    def close(self) -> None:
        """Drain commit and flush, persist the checkpoint, release the lock.  The abort
        marker is removed only when everything drained (a failed store stays 'unclean')."""
        if self._closed:
            return
        self._closed = True
        self._update_refusal()
        self.race.close()
        # Creation order: commit, flush, dispatch (catches up), queue flush (thorough).
        for service in self._services:
            service.stop()
        self._allocator.close()
        clean = self._failure is None
        if clean:
            self._on_flushed(force=True)
        if self._index is not None:
            self._index.close()
        self._reader.close()
        self._queues.close()
        self._segment_list.close()
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
        """Append and wait for the acknowledgement (acknowledge.py): the sync under sync
        flush, a follower's copy on a sync master."""
        result = self._commitlog.put(message)
        self._acks.wait([result])
        return result

    def put_batch(self, messages: Sequence[Message]) -> list[PutResult]:
        results = self._commitlog.put_batch(messages)
        self._acks.wait(results)
        return results

    def submit(self, message: Message) -> Future[PutResult]:
        """`put` for callers that must not block (an event loop): the future completes once
        the put is acknowledged (at once when `put_waits` is false).  Bridge to asyncio with
        `asyncio.wrap_future`."""
        result = self._commitlog.put(message)
        return self._acks.submit([result], result)

    def submit_batch(self, messages: Sequence[Message]) -> Future[list[PutResult]]:
        """`put_batch` without blocking; see `submit`."""
        results = self._commitlog.put_batch(messages)
        return self._acks.submit(results, results)

    def put_callback(self, message: Message, callback: Callable[[PutResult], None]) -> None:
        """`submit` without a future, for event loops at high rates: `callback(result)` runs
        once the put is acknowledged, on the acknowledging thread (the group commit's, or
        the one that took a follower's confirmation), or before this returns when nothing
        waits.  It must be cheap and must not block: hand the result to the loop (the
        writer service wakes its loop once per group commit, not once per put).  A
        concurrent future and its asyncio wrapper cost more than the put itself."""
        result = self._commitlog.put(message)
        self._acks.then([result], partial(callback, result))

    def put_batch_callback(self, messages: Sequence[Message],
                           callback: Callable[[list[PutResult]], None]) -> None:
        """`put_batch` without blocking; see `put_callback`."""
        results = self._commitlog.put_batch(messages)
        self._acks.then(results, partial(callback, results))

    @property
    def put_waits(self) -> bool:
        """True if a put's answer waits for a sync (sync flush) or a follower (sync master):
        callers on an event loop then use `submit` or `put_callback`."""
        return self._acks.waits

    def append(self, topic: str, queue_id: int, data: bytes) -> int:
        """The race API (seed 003): the queue offset of `data`, once synced; see race.py."""
        return self.race.append(topic, queue_id, data)

    def get_range(self, topic: str, queue_id: int, offset: int,
                  fetch_num: int) -> dict[int, bytes]:
        """Up to `fetch_num` bodies from `offset`, keyed 0..n-1; see race.py."""
        return self.race.get_range(topic, queue_id, offset, fetch_num)

    @property
    def dispatch_behind_bytes(self) -> int:
        """Readable commit log bytes not yet in the consume queues and the index."""
        return max(0, self.committed_position - self._dispatcher.dispatched_position)

    # -- state --------------------------------------------------------------------------
    @property
    def written_position(self) -> int:
        return self._segment_list.written_position

    @property
    def flushed_position(self) -> int:
        return self._segment_list.flushed_position

    @property
    def segment_count(self) -> int:
        return len(self._segment_list.segments)

    @property
    def pool_free_count(self) -> int | None:
        return self.pool.free_count if self.pool is not None else None

    @property
    def failure(self) -> str | None:
        """Why the store stopped accepting writes (a failed sync), or None."""
        return self._failure

    @property
    def group_commit_stats(self) -> GroupCommitStats:
        """Syncs of the group commit (none under async flush) and the fillers it wrote."""
        syncs = self._group_commit.syncs_total if self._group_commit is not None else 0
        return GroupCommitStats(syncs, *self._commitlog.padding_totals)

    @property
    def stats(self) -> StoreStats:
        """Running totals of preallocation, syncs, retention and this open's recovery."""
        allocator, retention = self._allocator, self._retention
        return StoreStats(
            segments_preallocated_total=allocator.segments_created_total,
            preallocation_seconds_total=allocator.create_seconds_total,
            flush_syncs_total=self._segment_list.syncs_total,
            retention_deleted_segments_total=retention.segments_deleted_total,
            retention_deleted_bytes_total=retention.bytes_deleted_total,
            recovery_mode=self.recovery_report.mode,
            recovery_truncated_bytes=self.recovery_report.truncated_bytes)

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        return self._commitlog.queue_offsets.get((topic, queue_id), 0)

    # -- internals ----------------------------------------------------------------------
    def _on_disk_full(self, reason: str | None) -> None:
        if reason != self._disk_full:
            self._disk_full = reason
            self._update_refusal()

    def _update_refusal(self) -> None:
        """What every put answers SERVICE_NOT_AVAILABLE with, if anything (worst first)."""
        reason = None
        if self._failure is not None:
            reason = f"store stopped: {self._failure}"
        elif self._closed:
            reason = "store is closed"
        elif not self.config.role.is_master:
            reason = "this store is a follower: it only appends its master's log"
        elif self._disk_full is not None:
            reason = self._disk_full
        self._commitlog.refused_reason = reason

    def _on_fatal(self, service: str, error: BaseException) -> None:
        self._failure = f"{service} failed: {error!r}"
        self._update_refusal()
        if self._group_commit is not None:
            self._group_commit.fail_all()
        if self._transfer is not None:
            self._transfer.fail_all()

    def _on_flushed(self, *, force: bool = False) -> None:
        """Persist the checkpoint at most every `checkpoint_interval_ms` (and on close)."""
        now_ms = time.monotonic() * 1000
        if not force and now_ms - self._last_checkpoint_ms < self.config.checkpoint_interval_ms:
            return
        self._last_checkpoint_ms = now_ms
        values = self._checkpoint.values
        values.physic_msg_timestamp_ms = self._segment_list.flushed_store_timestamp_ms
        values.master_flushed_offset = self._segment_list.flushed_position
        self._checkpoint.write()

    def _on_queues_flushed(self, covered_store_timestamp_ms: int) -> None:
        """After a thorough consume queue (and index) sync: record how far they are safe."""
        if self._index is not None:
            self._index.flush()
        values = self._checkpoint.values
        if covered_store_timestamp_ms:
            values.logics_msg_timestamp_ms = covered_store_timestamp_ms
            values.index_msg_timestamp_ms = covered_store_timestamp_ms
        self._checkpoint.write()

    @property
    def closed(self) -> bool:
        """True once `close()` began (services tell "closed" from "disk full" by it)."""
        return self._closed
