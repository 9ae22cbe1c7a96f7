"""The store's event graph: which part learns of what, built in one function (`wire`).

    put, put_batch, append_raw (CommitLog)
      └─ after an append(end) ─▶ commit service wakeup      pool on: once pages are due
      │                                                      (sync master: only at a roll)
      ├───────────────────────▶ positions publisher wakeup  positions_publish_enabled,
      │                                                      unless the caller publishes
      └───────────────────────▶ on_readable()               a master: pool off, or a sync
                                                             master (its sender commits)
    commit service (pool on)
      └─ after a commit ──────▶ on_readable()               a master
    async flush / group commit
      ├─ after a sync ────────▶ checkpointer                checkpoint: log time, flushed
      │                                                      position; the queue offsets
      └─ (group commit) ──────▶ parked puts answered        acknowledge.py
    follower's confirmation ──▶ parked sync-master puts     follower_sync.py
    indexer (dispatch/indexer.py)
      ├─ after a pass ────────▶ listener(notices)           "queue advanced" (the caller's)
      └─ thorough queue sync ─▶ checkpoint: queue, index times; `dispatched`
    retention
      ├─ disk used ───────────▶ puts refused / accepted again
      └─ log start moved ─────▶ indexer.follow_log_start    queues and index drop below it
    any service fails ───────▶ the store stops: puts refused, parked puts answered

Every observer is passed at construction; nothing is chained or rebound afterwards.  The
services start in `Wiring.services` order and stop in the same order: commit and flush
drain first, so dispatch (which stops with the indexer, after them) sees every byte.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from .config import StoreConfig
from .dispatch.dispatcher import Listener
from .dispatch.indexer import Indexer
from .errors import StoreFormatError
from .files.checkpoint import Checkpoint
from .files.watermarks import DispatchedFile
from .format import volume
from .log.acknowledge import PutAcknowledger
from .log.allocator import SegmentAllocator
from .log.checkpointer import LogCheckpointer
from .log.commitlog import CommitLog
from .log.flush import AsyncFlushService, CommitService, GroupCommitService
from .log.pool import TransientStorePool
from .log.publisher import PositionsPublisher, positions_snapshot
from .log.retention import OnDiskFull, RetentionService
from .log.segment_list import SegmentList
from .replication.follower_sync import GroupTransferService
from .replication.replication import Replication, start_replication
from .roles import BrokerRole
from .service_thread import FatalHandler, ServiceThread

AfterAppend = Callable[[int], None]


@dataclasses.dataclass
class Wiring:
    """The store's parts as `wire` connected them."""

    commitlog: CommitLog
    allocator: SegmentAllocator
    pool: TransientStorePool | None
    commit_service: CommitService | None
    replication: Replication
    acks: PutAcknowledger
    group_commit: GroupCommitService | None
    transfer: GroupTransferService | None
    retention: RetentionService
    checkpointer: LogCheckpointer
    publisher: PositionsPublisher | None
    services: list[ServiceThread]
    """The log's services, in start (and stop) order; the indexer runs its own."""


@dataclasses.dataclass(frozen=True)
class StoreHandlers:
    """The store's own reactions, passed into the graph."""

    on_fatal: FatalHandler
    on_disk_full: OnDiskFull
    failure: Callable[[], str | None]


def wire(directory: Path, config: StoreConfig, *, segment_list: SegmentList,
         queue_offsets: dict[tuple[str, int], int], indexer: Indexer | None,
         recovered_end_position: int, checkpoint: Checkpoint, handlers: StoreHandlers,
         on_readable: Callable[[], None] | None) -> Wiring:
    """Build the log's services and connect every part as the module docstring draws."""
    pool = (TransientStorePool(buffer_count=config.pool_buffer_count,
                               buffer_size_bytes=config.segment_size_bytes,
                               lock_memory=config.pool_lock_memory)
            if config.pool_enabled else None)
    readable = on_readable if config.role.is_master else None
    commit_service = (CommitService(segment_list, pool, config, on_committed=readable,
                                    on_fatal=handlers.on_fatal)
                      if pool is not None else None)
    publisher = (PositionsPublisher(directory, config,
                                    snapshot=positions_snapshot(segment_list),
                                    recovered_end_position=recovered_end_position,
                                    on_fatal=handlers.on_fatal)
                 if config.positions_publish_enabled else None)
    if publisher is not None and indexer is not None:
        indexer.follow_generation(publisher.generation)
    allocator = SegmentAllocator(segment_list.directory, config)
    commitlog = CommitLog(segment_list, config, allocator=allocator, pool=pool,
                          queue_offsets=queue_offsets,
                          after_append=_after_append(config, commit_service, publisher,
                                                     readable))
    checkpointer = LogCheckpointer(directory, config, checkpoint=checkpoint,
                                   segment_list=segment_list, commitlog=commitlog)
    group_commit, flush = _flush_service(config, segment_list, commit_service, commitlog,
                                         handlers, on_flushed=checkpointer.on_flushed)
    replication, acks, transfer = start_replication(
        config, segment_list=segment_list, commitlog=commitlog, commit_service=commit_service,
        group_commit=group_commit, failure=handlers.failure, on_fatal=handlers.on_fatal)
    retention = RetentionService(
        segment_list, config, on_disk_full=handlers.on_disk_full,
        on_min_position=indexer.follow_log_start if indexer is not None else None,
        dispatched_position=(lambda: indexer.dispatched_position) if indexer is not None
        else published_dispatched_position(directory),
        on_fatal=handlers.on_fatal)
    services: list[ServiceThread] = [service for service in (
        commit_service, flush, transfer, retention, publisher) if service is not None]
    return Wiring(commitlog=commitlog, allocator=allocator, pool=pool,
                  commit_service=commit_service, replication=replication,
                  acks=acks, group_commit=group_commit, transfer=transfer,
                  retention=retention, checkpointer=checkpointer, publisher=publisher,
                  services=services)


def published_dispatched_position(directory: Path) -> Callable[[], int]:
    """How far an indexer process has dispatched, as it publishes in `dispatched` (0 while
    it cannot be read: retention then deletes nothing)."""

    def dispatched_position() -> int:
        try:
            dispatched = DispatchedFile(directory / volume.DISPATCHED_FILE, writable=False)
        except (FileNotFoundError, StoreFormatError):
            return 0
        try:
            found = dispatched.read()
        except StoreFormatError:
            return 0
        finally:
            dispatched.close()
        return found[1]["dispatched_position"] if found is not None else 0

    return dispatched_position


def _after_append(config: StoreConfig, commit_service: CommitService | None,
                  publisher: PositionsPublisher | None,
                  readable: Callable[[], None] | None) -> AfterAppend | None:
    """One callable for the put path (it is on every put: no loop over an empty list)."""
    observers: list[AfterAppend] = []
    if commit_service is not None:
        observers.append(_unless_woken(
            commit_service, commit_service.wake_if_rolled
            if config.role is BrokerRole.SYNC_MASTER else commit_service.wake_if_due))
    if publisher is not None:
        wake_publisher = publisher.wakeup

        def wake_unless_caller_publishes(_end_position: int) -> None:
            if not publisher.caller_publishes:
                wake_publisher()

        observers.append(wake_unless_caller_publishes)
    if readable is not None and (commit_service is None
                                 or config.role is BrokerRole.SYNC_MASTER):
        observers.append(lambda _end_position: readable())
    if not observers:
        return None
    if len(observers) == 1:
        return observers[0]
    fixed = tuple(observers)

    def after_append(end_position: int) -> None:
        for observer in fixed:
            observer(end_position)

    return after_append


def _unless_woken(service: ServiceThread, wake: AfterAppend) -> AfterAppend:
    """`wake` (it only ever calls `service.wakeup()`), skipped while that wakeup is pending:
    then all it could do is find it set.  Measured with the pool on, single puts found it
    pending 99.99% of the time (the commit service wakes, then waits for the GIL the
    producer holds), and the one check costs a fraction of the call it spares.  A wakeup
    seen pending is consumed only before the service reads the written position, so the
    bytes of this append are in its next pass."""
    pending = service.wakeup_pending

    def wake_unless_pending(end_position: int) -> None:
        if not pending():
            wake(end_position)

    return wake_unless_pending


def _flush_service(config: StoreConfig, segment_list: SegmentList,
                   commit_service: CommitService | None, commitlog: CommitLog,
                   handlers: StoreHandlers, *, on_flushed: Callable[[], None]
                   ) -> tuple[GroupCommitService | None, ServiceThread]:
    """Sync flush: the group commit (committing on demand with the pool; sealing groups with
    alignment).  Async flush: the interval flush service."""
    if not config.flush_sync:
        return None, AsyncFlushService(segment_list, config, on_flushed=on_flushed,
                                       on_fatal=handlers.on_fatal)
    commit = commit_service.commit_now if commit_service is not None else None
    # (config_checks: a follower never aligns, its log is the master's byte for byte)
    seal = commitlog.seal_group if config.group_commit_align_bytes else None
    group_commit = GroupCommitService(segment_list, config, commit=commit, seal=seal,
                                      on_flushed=on_flushed,
                                      on_fatal=handlers.on_fatal)
    return group_commit, group_commit


__all__ = ["Listener", "StoreHandlers", "Wiring", "wire"]
