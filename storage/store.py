"""`MessageStore`: the facade that opens a directory, recovers it and runs the services.

    <directory>/commitlog/<20-digit start position>   segments
    <directory>/consumequeue/, index/                 built by the embedded indexer
    <directory>/checkpoint                            synced watermarks
    <directory>/lock                                  single-writer lock
    <directory>/abort                                 present while open (unclean if found)

Open order (opening.py): lock → abort marker and checkpoint → segments → indexer files →
recover → here: event graph (wiring.py) → indexer catches up, starts → log services start →
abort marker created.  Close runs it backwards; the marker goes only if all drained cleanly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from types import TracebackType

from .config import StoreConfig
from .dispatch.dispatcher import Listener
from .dispatch.stalled_queue import StalledQueue
from .errors import StoreClosedError
from .format.message import Message, PutResult, StoredMessage
from .format.subscription import TagFilter
from .log.flush import GroupCommitStats
from .log.publisher import PositionsPublisher
from .opening import OpenedStore, open_directory
from .reads.get import GetResult, PropertyFilter
from .reads.store_reads import StoreReads
from .replication.replication import Replication
from .stats import StoreStats
from .store_sizes import embedded_config
from .wiring import StoreHandlers, wire

log = logging.getLogger(__name__)


class MessageStore:
    """An open store.  Use `MessageStore.open(directory, config)`; close with `close()`."""

    def __init__(self, directory: Path, config: StoreConfig, opened: OpenedStore, *,
                 listener: Listener | None, on_readable: Callable[[], None] | None) -> None:
        self.directory = directory
        self.config = config
        self.recovery_report = opened.report
        self._opened = opened
        self._segment_list = opened.segment_list
        self._indexer = opened.indexer
        self._checkpoint = opened.checkpoint
        self._closed = False
        self._failure: str | None = None
        self._disk_full: str | None = None
        self._wiring = wire(directory, config, segment_list=self._segment_list,
                            queue_offsets=opened.queue_offsets, indexer=self._indexer,
                            recovered_end_position=opened.report.end_position,
                            checkpoint=self._checkpoint,
                            handlers=StoreHandlers(on_fatal=self._on_fatal,
                                                   on_disk_full=self._on_disk_full,
                                                   failure=lambda: self._failure),
                            on_readable=on_readable)
        self._commitlog = self._wiring.commitlog
        self._acks = self._wiring.acks
        self.pool = self._wiring.pool
        self.replication: Replication = self._wiring.replication
        """The writer service's replication server (masters) or client (follower) uses it."""
        self._append = self._commitlog.put
        self._append_batch = self._commitlog.put_batch
        indexer = self._indexer
        self._reads = StoreReads(
            config, find_segment=self._segment_list.find,
            log_range=lambda: (self.min_position, self.committed_position),
            # The writer of a split deployment builds no consume queues.
            queue=indexer.queues.get if indexer is not None else lambda _topic, _queue: None,
            index=indexer.index if indexer is not None else None)
        last = self._segment_list.last
        # Have the next segment ready before the first put (an empty follower's log starts
        # where the master's does: only its first append knows where).
        if (last is not None and last.is_full) or (last is None and config.role.is_master):
            self._wiring.allocator.prepare(last.end_position if last is not None
                                           else self._segment_list.min_position)
        if indexer is not None:
            indexer.start(listener=listener, on_fatal=self._on_fatal, catch_up=True)
        for service in self._wiring.services:
            service.start()
        self._update_refusal()

    # -- open and close --------------------------------------------------------------------
    @classmethod
    def open(cls, directory: str | Path, config: StoreConfig | None = None, *,
             listener: Listener | None = None,
             on_readable: Callable[[], None] | None = None) -> MessageStore:
        """Open (creating if needed) and recover the store in `directory`.

        `listener` gets the batched "queue advanced" notices of the embedded indexer.
        `on_readable` (masters) is called, on the appending or committing thread, whenever
        bytes a follower may read have grown; it must be cheap and must not block (the
        writer service's replication server wakes its senders with it).

        Without a `config`: the directory's own sizes, for a new store the embedded
        profile's (64 MiB segments, a 21 MB index file; store_sizes.py)."""
        directory = Path(directory)
        config = config or embedded_config(directory)
        opened = open_directory(directory, config)
        try:
            store = cls(directory, config, opened, listener=listener, on_readable=on_readable)
        except BaseException:
            opened.close()
            raise
        opened.abort.create()
        log.info("opened %s: recovery %s, log [%d, %d)", directory, opened.report.mode.value,
                 store.min_position, store.committed_position)
        return store

    def close(self) -> None:
        """Drain commit and flush, let the indexer catch up and sync, persist the
        checkpoint, release the lock.  The abort marker is removed only when everything
        drained (a failed store stays 'unclean')."""
        if self._closed:
            return
        self._closed = True
        self._update_refusal()
        for service in self._wiring.services:
            service.stop()
        if self._indexer is not None:
            self._indexer.stop()
        self._wiring.allocator.close()
        clean = self._failure is None
        if clean:
            self._wiring.checkpointer.on_flushed(force=True)
        if self._indexer is not None:
            self._indexer.close()
        self._segment_list.close()
        self._checkpoint.close()
        if self.pool is not None:
            self.pool.close()
        if clean:
            self._opened.abort.remove()
        self._opened.lock.release()

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # -- put ----------------------------------------------------------------------------
    def put(self, message: Message) -> PutResult:
        """Append and wait for the acknowledgement (acknowledge.py): the sync under sync
        flush, a follower's copy on a sync master; at once when neither is set."""
        result = self._append(message)
        if self._acks.waits:
            self._acks.wait([result])
        return result

    def put_batch(self, messages: Sequence[Message]) -> list[PutResult]:
        results = self._append_batch(messages)
        if self._acks.waits:
            self._acks.wait(results)
        return results

    def submit(self, message: Message) -> Future[PutResult]:
        """`put` for callers that must not block (an event loop): the future completes once
        the put is acknowledged (at once when `put_waits` is false).  Bridge to asyncio with
        `asyncio.wrap_future`."""
        result = self._append(message)
        return self._acks.submit([result], result)

    def submit_batch(self, messages: Sequence[Message]) -> Future[list[PutResult]]:
        """`put_batch` without blocking; see `submit`."""
        results = self._append_batch(messages)
        return self._acks.submit(results, results)

    def put_callback(self, message: Message, callback: Callable[[PutResult], None]) -> None:
        """`submit` without a future, for event loops at high rates: `callback(result)` runs
        once the put is acknowledged, on the acknowledging thread (the group commit's, or
        the one that took a follower's confirmation), or before this returns when nothing
        waits.  It must be cheap and must not block: hand the result to the loop (the
        writer service wakes its loop once per group commit, not once per put).  A
        concurrent future and its asyncio wrapper cost more than the put itself."""
        result = self._append(message)
        self._acks.then([result], partial(callback, result))

    def put_batch_callback(self, messages: Sequence[Message],
                           callback: Callable[[list[PutResult]], None]) -> None:
        """`put_batch` without blocking; see `put_callback`."""
        results = self._append_batch(messages)
        self._acks.then(results, partial(callback, results))

    @property
    def put_waits(self) -> bool:
        """A put's answer waits for a sync or a follower: on an event loop, use `submit`."""
        return self._acks.waits

    def topic_names(self) -> set[str]:
        """Every topic the log holds a queue of (a copy: the writer's topic gate's start)."""
        _, offsets = self._commitlog.snapshot_queue_offsets()
        return {topic for topic, _ in offsets}

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next put to the queue takes."""
        return self._commitlog.queue_offsets.get((topic, queue_id), 0)

    # -- read (reads/store_reads.py) ------------------------------------------------------
    def message_at(self, physical_offset: int) -> StoredMessage:
        """Decode the record starting at `physical_offset` (RocketMQ `lookMessageByOffset`)."""
        self._check_open()
        return self._reads.message_at(physical_offset)

    def iter_messages(self, start_position: int | None = None) -> Iterator[StoredMessage]:
        """Every message from `start_position` (default: the log's start) on, in order."""
        self._check_open()
        return self._reads.iter_messages(start_position)

    def get(self, topic: str, queue_id: int, offset: int, max_messages: int, *,
            tags: TagFilter = None, records_only: bool = False,
            property_filter: PropertyFilter | None = None) -> GetResult:
        """Up to `max_messages` from queue offset `offset` (RocketMQ `getMessage`); release
        the result when done.  `tags`: an expression ("TagA || TagB", "*") or tags (else
        `SubscriptionExpressionError`); `property_filter`: only messages whose properties it
        passes (`compile_sql92`); `records_only`: only `records`, the bytes, nothing decoded."""
        self._check_open()
        return self._reads.get(topic, queue_id, offset, max_messages, tags=tags,
                               records_only=records_only, property_filter=property_filter)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self._reads.min_offset(topic, queue_id)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The next offset of the queue (exclusive), as dispatched so far."""
        return self._reads.max_offset(topic, queue_id)

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after `timestamp_ms` (else the max offset)."""
        self._check_open()
        return self._reads.offset_by_time(topic, queue_id, timestamp_ms)

    def query_by_key(self, topic: str, key: str, begin_ms: int = 0, end_ms: int | None = None,
                     max_messages: int = 32) -> list[StoredMessage]:
        """Messages of `topic` with `key` stored within [begin_ms, end_ms], oldest first."""
        self._check_open()
        return self._reads.query_by_key(topic, key, begin_ms, end_ms, max_messages)

    def query_by_tag(self, topic: str, tag: str, begin_ms: int = 0, end_ms: int | None = None,
                     max_messages: int = 32) -> list[StoredMessage]:
        """Messages of `topic` tagged `tag` in [begin_ms, end_ms] (the index's tag entries)."""
        self._check_open()
        return self._reads.query_by_tag(topic, tag, begin_ms, end_ms, max_messages)

    @property
    def damaged_reads_total(self) -> int:
        return self._reads.damaged_reads_total  # reads that met a damaged record

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self.directory}: store is closed")

    # -- dispatch -------------------------------------------------------------------------
    @property
    def dispatched_position(self) -> int:
        """How far the embedded indexer has dispatched (the committed end without one)."""
        if self._indexer is None:
            return self.committed_position
        return self._indexer.dispatched_position

    @property
    def dispatch_behind_bytes(self) -> int:
        """Committed commit log bytes not yet in the consume queues and the index."""
        return max(0, self.committed_position - self.dispatched_position)

    @property
    def dispatch_stalled_reason(self) -> str | None:
        """Why the embedded indexer waits to dispatch (a full disk: it retries), or None."""
        return self._indexer.stalled_reason if self._indexer is not None else None

    @property
    def dispatch_stalled_queues(self) -> list[StalledQueue]:
        """The queues an error of their own files stalled (the others go on), oldest first."""
        return self._indexer.stalled_queues if self._indexer is not None else []

    def wait_dispatched(self, end_position: int | None = None, *, timeout_ms: int) -> bool:
        """Wait until the consume queues and the index hold every record below
        `end_position` (a put's `PutResult.end_position`; default: the written end, not the
        committed one: with the pool, the commit service's pass woken here makes a put
        readable); False if they did not within `timeout_ms` or dispatch failed."""
        written = self.written_position
        target = written if end_position is None else end_position
        if target > written:
            raise ValueError(f"end_position {target} is past the written end {written}")
        commit_service = self._wiring.commit_service
        deadline = time.monotonic() + timeout_ms / 1000
        while self.dispatched_position < target:
            if (self._indexer is not None and self._indexer.failure is not None) or \
                    self._failure is not None or time.monotonic() >= deadline:
                return False
            if commit_service is not None and self.committed_position < target:
                commit_service.wakeup()
            if self._indexer is not None:
                self._indexer.wake_dispatch()
            time.sleep(0.001)
        return True

    @property
    def positions_publisher(self) -> PositionsPublisher | None:
        """For a put's caller that publishes itself (publisher.py); None with the pool."""
        return self._wiring.publisher if self.pool is None else None

    def wake_dispatch(self) -> None:
        """Ask the embedded indexer for a pass now (the race API's reads use it)."""
        if self._indexer is not None:
            self._indexer.wake_dispatch()

    # -- state --------------------------------------------------------------------------
    @property
    def min_position(self) -> int:
        return self._segment_list.min_position

    @property
    def written_position(self) -> int:
        """End of the appended bytes (the log's end)."""
        return self._segment_list.written_position

    @property
    def committed_position(self) -> int:
        """Exclusive end of the readable log (committed bytes with the pool on)."""
        return self._segment_list.committed_position

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
    def closed(self) -> bool:
        """True once `close()` began (services tell "closed" from "disk full" by it)."""
        return self._closed

    @property
    def group_commit_stats(self) -> GroupCommitStats:
        """Syncs of the group commit (none under async flush) and the fillers it wrote."""
        group_commit = self._wiring.group_commit
        syncs = group_commit.syncs_total if group_commit is not None else 0
        return GroupCommitStats(syncs, *self._commitlog.padding_totals)

    @property
    def stats(self) -> StoreStats:
        """Running totals of preallocation, syncs, retention and this open's recovery."""
        allocator, retention = self._wiring.allocator, self._wiring.retention
        return StoreStats(
            segments_preallocated_total=allocator.segments_created_total,
            preallocation_seconds_total=allocator.create_seconds_total,
            flush_syncs_total=self._segment_list.syncs_total,
            retention_deleted_segments_total=retention.segments_deleted_total,
            retention_deleted_bytes_total=retention.bytes_deleted_total,
            recovery_mode=self.recovery_report.mode,
            recovery_truncated_bytes=self.recovery_report.truncated_bytes)

    # -- the store's reactions (wiring.py) --------------------------------------------------
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
        if self._wiring.group_commit is not None:
            self._wiring.group_commit.fail_all()
        if self._wiring.transfer is not None:
            self._wiring.transfer.fail_all()
