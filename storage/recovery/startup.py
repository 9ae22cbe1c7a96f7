"""Opening a store directory: lock, load, recover, and decide where dispatch resumes.

    lock → abort marker, checkpoint → commit log segments, consume queues, index files
         → plan recovery (decision table in recovery.py)
         → scan the commit log from where the consume queues end (or the verified window)
         → cut the commit log at its valid end; cut consume queues that point past it
         → next queue offsets = consume queues' ends, raised by the records scanned
         → dispatch resumes where the consume queues end, or earlier where the index ends
           (abnormal / full recovery: at the verified window); repeats are ignored

With `dispatch_enabled=False` (the writer of a split deployment) only the commit log is
recovered; consume queues and the index belong to the indexer process (`_recover_log_only`).

Everything opened here is closed again if a later step fails, and the lock is released.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from ..config import StoreConfig
from ..errors import StoreFormatError
from ..files.checkpoint import Checkpoint
from ..files.lockfile import AbortMarker, StoreLock
from ..files.watermarks import DispatchedFile
from ..index.index_service import IndexService
from ..log.segment_list import SegmentList
from ..queues.consume_queues import ConsumeQueues
from ..queues.queue_offsets import read_next_offsets
from .recovery import RecoveryMode, RecoveryReport, plan_recovery, recover

COMMITLOG_DIRECTORY = "commitlog"
INDEX_DIRECTORY = "index"
DISPATCHED_FILE = "dispatched"

log = logging.getLogger(__name__)


@dataclasses.dataclass
class OpenedStore:
    """Everything `MessageStore` runs on, recovered and consistent."""

    lock: StoreLock
    abort: AbortMarker
    checkpoint: Checkpoint
    segment_list: SegmentList
    queues: ConsumeQueues
    index: IndexService | None
    report: RecoveryReport
    queue_offsets: dict[tuple[str, int], int]
    dispatched_position: int


def open_directory(directory: Path, config: StoreConfig) -> OpenedStore:
    (directory / COMMITLOG_DIRECTORY).mkdir(parents=True, exist_ok=True)
    lock = StoreLock(directory / "lock")
    lock.acquire()
    closers = []
    try:
        abort = AbortMarker(directory / "abort")
        checkpoint = Checkpoint(directory / "checkpoint")
        closers.append(checkpoint.close)
        segment_list = SegmentList(directory / COMMITLOG_DIRECTORY,
                                   segment_size_bytes=config.segment_size_bytes,
                                   pooled=config.pool_enabled)
        closers.append(segment_list.close)
        queues = ConsumeQueues(directory, file_size_bytes=config.consume_queue_file_size_bytes)
        closers.append(queues.close)
        segment_list.load()
        if not config.dispatch_enabled:
            return _recover_log_only(directory, lock, abort, checkpoint, segment_list, queues,
                                     config)
        index = _index_service(directory, config)
        if index is not None:
            closers.append(index.close)
        queues.load()
        if index is not None:
            index.load(abnormal=abort.present,
                       index_timestamp_ms=checkpoint.values.index_msg_timestamp_ms)
        return _recover(lock, abort, checkpoint, segment_list, queues, index, config)
    except BaseException:
        for close in reversed(closers):
            close()
        lock.release()
        raise


def _index_service(directory: Path, config: StoreConfig) -> IndexService | None:
    if not config.index_enabled:
        return None
    return IndexService(directory=directory / INDEX_DIRECTORY,
                        hash_slot_count=config.index_hash_slot_count,
                        index_count_max=config.index_count_max,
                        query_results_max=config.index_query_results_max)


def _recover(lock: StoreLock, abort: AbortMarker, checkpoint: Checkpoint, segment_list: SegmentList,
             queues: ConsumeQueues, index: IndexService | None,
             config: StoreConfig) -> OpenedStore:
    report = plan_recovery(segment_list.segments, abort_present=abort.present,
                           checkpoint_state=checkpoint.state, checkpoint=checkpoint.values,
                           recovery_segments_max=config.recovery_segments_max)
    dispatched_end = queues.max_physical_end
    scanned_offsets: dict[tuple[str, int], int] = {}
    recover(segment_list, report, scanned_offsets, scan_from_position=dispatched_end)
    queues.truncate_to_physical(report.end_position)  # entries pointing past the log's end
    if index is not None:
        index.cut_back(report.end_position)  # re-index what is written there again
    queue_offsets = queues.next_offsets()
    for key, next_offset in scanned_offsets.items():
        queue_offsets[key] = max(next_offset, queue_offsets.get(key, 0))
    dispatched_position = max(queues.max_physical_end, segment_list.min_position)
    if index is not None:
        # Index files newer than the checkpoint were dropped on an unclean exit: rebuild
        # from where the surviving ones end (consume queues ignore the repeats).
        dispatched_position = min(dispatched_position,
                                  max(index.end_physical_offset, segment_list.min_position))
    if report.mode in (RecoveryMode.ABNORMAL, RecoveryMode.FULL) and segment_list.segments:
        first_verified = min(report.verify_from_segment, len(segment_list.segments) - 1)
        window_start = segment_list.segments[first_verified].start_position
        dispatched_position = max(min(dispatched_position, window_start), segment_list.min_position)
    _set_timestamps(segment_list, report)
    return OpenedStore(lock=lock, abort=abort, checkpoint=checkpoint, segment_list=segment_list,
                       queues=queues, index=index, report=report, queue_offsets=queue_offsets,
                       dispatched_position=dispatched_position)


def _recover_log_only(directory: Path, lock: StoreLock, abort: AbortMarker,
                      checkpoint: Checkpoint, segment_list: SegmentList, queues: ConsumeQueues,
                      config: StoreConfig) -> OpenedStore:
    """The writer of a split deployment: another process owns `consumequeue/` and `index/`,
    so they are neither loaded nor cut here.  Queue offsets come from the consume queues
    below what the indexer published as synced (`dispatched`), read-only, and from the
    records recovery scans from there on."""
    report = plan_recovery(segment_list.segments, abort_present=abort.present,
                           checkpoint_state=checkpoint.state, checkpoint=checkpoint.values,
                           recovery_segments_max=config.recovery_segments_max)
    synced = max(indexer_synced_position(directory), segment_list.min_position)
    queue_offsets: dict[tuple[str, int], int] = {}
    recover(segment_list, report, queue_offsets, scan_from_position=synced)
    below = read_next_offsets(directory, below_physical=min(synced, report.end_position),
                              file_size_bytes=config.consume_queue_file_size_bytes)
    for key, next_offset in below.items():
        queue_offsets[key] = max(next_offset, queue_offsets.get(key, 0))
    _set_timestamps(segment_list, report)
    return OpenedStore(lock=lock, abort=abort, checkpoint=checkpoint, segment_list=segment_list,
                       queues=queues, index=None, report=report, queue_offsets=queue_offsets,
                       dispatched_position=report.end_position)


def indexer_synced_position(directory: Path) -> int:
    """What the indexer published as synced in `dispatched`; 0 if nothing (yet) or unreadable
    (then recovery scans the whole log for queue offsets: slower, still right)."""
    try:
        dispatched = DispatchedFile(directory / DISPATCHED_FILE, writable=False)
    except (FileNotFoundError, StoreFormatError) as error:
        if not isinstance(error, FileNotFoundError):
            log.warning("ignoring %s: %s", DISPATCHED_FILE, error)
        return 0
    try:
        found = dispatched.read()
    except StoreFormatError as error:
        log.warning("ignoring %s: %s", DISPATCHED_FILE, error)
        return 0
    finally:
        dispatched.close()
    return found[1]["synced_position"] if found is not None else 0


def _set_timestamps(segment_list: SegmentList, report: RecoveryReport) -> None:
    segment_list.last_store_timestamp_ms = report.last_store_timestamp_ms
    segment_list.committed_store_timestamp_ms = report.last_store_timestamp_ms
    segment_list.flushed_store_timestamp_ms = report.last_store_timestamp_ms
