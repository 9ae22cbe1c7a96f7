"""Opening a store directory: lock, load, recover, and where the queues and dispatch resume.

    lock → abort marker, checkpoint → commit log segments
         → the indexer's files: consume queues, index (embedded; dispatch_enabled)
         → plan recovery (decision table in recovery.py)
         → scan the commit log from where the consume queues end (or the verified window)
         → cut the commit log at its valid end; the indexer cuts what points past it
         → next queue offsets = consume queues' ends, raised by the records scanned
         → the indexer's resume rule (dispatch/indexer.py), no later than the verified
           window after an abnormal or full recovery

With `dispatch_enabled=False` (the writer of a split deployment) only the commit log is
recovered: consume queues and the index belong to the indexer process, and queue offsets
come from its queues below what it published as synced (`dispatched`), read-only
(`queues/reader.py`), raised by the records recovery scans from there on.

Everything opened here is closed again if a later step fails, and the lock is released.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from pathlib import Path

from .config import CorruptionPolicy, StoreConfig
from .dispatch.indexer import Indexer
from .dispatch.log_source import SegmentListSource
from .errors import StoreFormatError
from .files.checkpoint import Checkpoint
from .files.io import make_directories_durably
from .files.lockfile import AbortMarker, StoreLock
from .files.queue_offsets_file import QueueOffsetsSnapshot, read_queue_offsets
from .files.watermarks import DispatchedFile
from .format import volume
from .log.segment_list import SegmentList
from .queues.reader import read_next_offsets
from .recovery.recovery import RecoveryMode, RecoveryReport, plan_recovery, recover

log = logging.getLogger(__name__)

QueueOffsets = dict[tuple[str, int], int]


@dataclasses.dataclass
class OpenedStore:
    """Everything `MessageStore` runs on, recovered and consistent."""

    lock: StoreLock
    abort: AbortMarker
    checkpoint: Checkpoint
    segment_list: SegmentList
    indexer: Indexer | None
    """The embedded indexer (dispatch_enabled), resumed, not yet started."""
    source: SegmentListSource
    report: RecoveryReport
    queue_offsets: QueueOffsets

    def close(self) -> None:
        """Undo the open (a later step of the store's construction failed)."""
        if self.indexer is not None:
            self.indexer.close()
        self.segment_list.close()
        self.checkpoint.close()
        self.lock.release()


def open_directory(directory: Path, config: StoreConfig) -> OpenedStore:
    make_directories_durably(directory / volume.COMMITLOG_DIRECTORY)
    lock = StoreLock(directory / volume.LOCK_FILE)
    lock.acquire()
    closers: list[Callable[[], None]] = [lock.release]
    try:
        abort = AbortMarker(directory / volume.ABORT_FILE)
        checkpoint = Checkpoint(directory / volume.CHECKPOINT_FILE)
        closers.append(checkpoint.close)
        segment_list = SegmentList(directory / volume.COMMITLOG_DIRECTORY,
                                   segment_size_bytes=config.segment_size_bytes,
                                   pooled=config.pool_enabled)
        closers.append(segment_list.close)
        repairs = segment_list.load(
            repair=config.corruption_policy is CorruptionPolicy.SKIP)
        source = SegmentListSource(segment_list)
        indexer = None
        if config.dispatch_enabled:
            indexer = Indexer(directory, config, source=source, checkpoint=checkpoint,
                              abnormal=abort.present,
                              publish_dispatched=config.positions_publish_enabled)
            closers.append(indexer.close)
        report = plan_recovery(segment_list.segments, abort_present=abort.present,
                               checkpoint_state=checkpoint.state, checkpoint=checkpoint.values,
                               recovery_segments_max=config.recovery_segments_max)
        report.damage.extend(repairs)
        snapshot = _usable_snapshot(directory, segment_list, report)
        if indexer is not None:
            queue_offsets = _recover_with_indexer(segment_list, indexer, report, config,
                                                  snapshot)
        else:
            queue_offsets = _recover_log_only(directory, segment_list, report, config,
                                              snapshot)
        _set_timestamps(segment_list, report)
        _record_recovered(checkpoint, segment_list, report)
        source.recovered_end_position = report.end_position
    except BaseException:
        for close in reversed(closers):
            close()
        raise
    return OpenedStore(lock=lock, abort=abort, checkpoint=checkpoint,
                       segment_list=segment_list, indexer=indexer, source=source,
                       report=report, queue_offsets=queue_offsets)


def _usable_snapshot(directory: Path, segment_list: SegmentList,
                     report: RecoveryReport) -> QueueOffsetsSnapshot | None:
    """The writer's queue offset snapshot, if it counts only records that are still in the
    log: taken at a position the checkpoint records as synced, and not below the log's
    start (retention deleted records it did not count)."""
    snapshot = read_queue_offsets(directory)
    if snapshot is None:
        return None
    if not segment_list.min_position <= snapshot.position <= report.durable_position:
        log.info("queue offset snapshot at %d is outside [%d, %d]: not used", snapshot.position,
                 segment_list.min_position, report.durable_position)
        return None
    return snapshot


def _recover_with_indexer(segment_list: SegmentList, indexer: Indexer, report: RecoveryReport,
                          config: StoreConfig,
                          snapshot: QueueOffsetsSnapshot | None) -> QueueOffsets:
    """Scan from where the consume queues end (or the snapshot, if earlier), cut, and resume
    the indexer."""
    scanned: QueueOffsets = {}
    scan_from = indexer.queues.max_physical_end
    if snapshot is not None:
        scan_from = min(scan_from, snapshot.position)
    recover(segment_list, report, scanned, scan_from_position=scan_from,
            policy=config.corruption_policy)
    indexer.cut_back(report.end_position)
    for damage in report.damage:
        indexer.dispatcher.note_damage(damage)
    floor = None
    if report.mode in (RecoveryMode.ABNORMAL, RecoveryMode.FULL) and segment_list.segments:
        first_verified = min(report.verify_from_segment, len(segment_list.segments) - 1)
        floor = segment_list.segments[first_verified].start_position
    indexer.resume(floor_position=floor)
    return _merge(indexer.queues.next_offsets(), snapshot.offsets if snapshot else {}, scanned)


def _recover_log_only(directory: Path, segment_list: SegmentList, report: RecoveryReport,
                      config: StoreConfig,
                      snapshot: QueueOffsetsSnapshot | None) -> QueueOffsets:
    """The writer of a split deployment: its own queue offset snapshot, raised by the
    records recovery scans from its position; without one (a store written before it, or a
    checkpoint RocketMQ wrote), the whole log is scanned, and the indexer's queues below
    what it synced (read-only) count too.  Whichever process starts first, the offsets
    never go back."""
    scanned: QueueOffsets = {}
    if snapshot is not None:
        recover(segment_list, report, scanned, scan_from_position=snapshot.position,
                policy=config.corruption_policy)
        return _merge(snapshot.offsets, scanned)
    synced = max(indexer_synced_position(directory), segment_list.min_position)
    recover(segment_list, report, scanned, scan_from_position=segment_list.min_position,
            policy=config.corruption_policy)
    below = read_next_offsets(directory, below_physical=min(synced, report.end_position),
                              file_size_bytes=config.consume_queue_file_size_bytes)
    return _merge(below, scanned)


def _merge(*sources: QueueOffsets) -> QueueOffsets:
    """Each source is a lower bound of every queue's next offset: the highest is right."""
    merged: QueueOffsets = {}
    for source in sources:
        for key, next_offset in source.items():
            merged[key] = max(next_offset, merged.get(key, 0))
    return merged


def indexer_synced_position(directory: Path) -> int:
    """What the indexer published as synced in `dispatched`; 0 if nothing (yet) or unreadable
    (then recovery scans the whole log for queue offsets: slower, still right)."""
    try:
        dispatched = DispatchedFile(directory / volume.DISPATCHED_FILE, writable=False)
    except (FileNotFoundError, StoreFormatError) as error:
        if not isinstance(error, FileNotFoundError):
            log.warning("ignoring %s: %s", volume.DISPATCHED_FILE, error)
        return 0
    try:
        found = dispatched.read()
    except StoreFormatError as error:
        log.warning("ignoring %s: %s", volume.DISPATCHED_FILE, error)
        return 0
    finally:
        dispatched.close()
    return found[1]["synced_position"] if found is not None else 0


def _record_recovered(checkpoint: Checkpoint, segment_list: SegmentList,
                      report: RecoveryReport) -> None:
    """Make what recovery kept durable and say so in the checkpoint now: after a crash the
    bytes above the durable position may be only in the page cache, and until the first
    flush the checkpoint would still claim the old position (a power loss before that
    flush could then lose records recovery kept)."""
    if report.end_position > report.durable_position:
        for segment in segment_list.segments:
            if segment.end_position > report.durable_position and \
                    segment.start_position < report.end_position:
                os.fdatasync(segment.fd)
    values = checkpoint.values
    if report.last_store_timestamp_ms:
        values.physic_msg_timestamp_ms = report.last_store_timestamp_ms
    values.master_flushed_offset = report.end_position
    checkpoint.write()


def _set_timestamps(segment_list: SegmentList, report: RecoveryReport) -> None:
    segment_list.last_store_timestamp_ms = report.last_store_timestamp_ms
    segment_list.committed_store_timestamp_ms = report.last_store_timestamp_ms
    segment_list.flushed_store_timestamp_ms = report.last_store_timestamp_ms
