"""`Replication`: what the writer service's replication server and client use of a store.

    master:   read_log(position)      whole records from `position`, as stored (record_chunks);
                                      a sync master with the pool commits on demand first
              on_readable             (`MessageStore.open`) woken when new bytes become
                                      readable: after each append (pool off) or each commit
                                      (pool on), and after each append of a sync master with
                                      the pool (read_log commits); see wiring.py
              progress                followers' confirmed positions (follower_sync.py)
    follower: append_raw(position, bytes)   the master's bytes at exactly the log's end

No sockets here: the engine stays free of networking (services/writer/replication_*.py).
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import StoreConfig
from ..errors import ReplicationGapError
from ..format.record_chunks import record_starts_at, whole_records_end
from ..log.acknowledge import PutAcknowledger, SyncAcknowledger
from ..log.commitlog import CommitLog
from ..log.flush import CommitService, GroupCommitService
from ..log.segment_list import SegmentList
from ..roles import BrokerRole
from ..service_thread import FatalHandler
from .follower_sync import FollowerAcknowledger, FollowerPositions, GroupTransferService


class LogRangeError(ReplicationGapError):
    """A follower asked for a position this log cannot serve: below its start (retention
    deleted it) or past its end (the follower holds bytes this master never wrote)."""


class Replication:
    def __init__(self, *, role: BrokerRole, segment_list: SegmentList, commitlog: CommitLog,
                 commit_service: CommitService | None, progress: FollowerPositions | None,
                 acknowledger: FollowerAcknowledger | None) -> None:
        self.role = role
        self._segment_list = segment_list
        self._commitlog = commitlog
        self._commit_service = commit_service
        self.progress = progress
        """Masters only: the connected followers and what each confirmed."""
        self.acknowledger = acknowledger
        """Sync masters only (its `observe_latency` feeds the sync-ack latency metric)."""
        self._commit_on_read = (commit_service if role is BrokerRole.SYNC_MASTER
                                else None)
        """Sync master with the pool: every put waits for a follower, so whoever reads for
        the followers commits on demand first: once for all the puts since its last read,
        instead of after the commit service's 16 KiB or 200 ms (the cliff of RocketMQ issue
        #1372)."""

    # -- master --------------------------------------------------------------------------
    def read_log(self, position: int, *, size_bytes_max: int) -> bytes:
        """Whole records from `position` (a record boundary) to at most `size_bytes_max`
        bytes on (a larger first record comes whole), within one segment; b"" when nothing
        past `position` is readable yet.  `LogRangeError` outside the log."""
        segment_list = self._segment_list
        if (self._commit_on_read is not None
                and segment_list.committed_position < segment_list.written_position):
            self._commit_on_read.commit_now(notify=False)
        segment = segment_list.find(position)
        if segment is None or not segment.hold():
            if position == segment_list.written_position or (
                    segment_list.segments and position == segment_list.segments[-1].end_position):
                return b""  # at the end; the next segment does not exist yet
            raise LogRangeError(f"position {position} is outside this log "
                                f"[{segment_list.min_position}, {segment_list.written_position})")
        try:
            start = position - segment.start_position
            end = segment.read_position
            if start >= end:
                return b""
            cut = whole_records_end(segment.mapping, start=start, end=end,
                                    size_bytes_max=size_bytes_max)
            return segment.mapping[start:cut]
        finally:
            segment.release()

    def check_start(self, position: int) -> int:
        """Where to stream from for a follower that reported `position`: there, or the log's
        start for an empty follower (0).  `LogRangeError` if this log cannot serve it."""
        segment_list = self._segment_list
        if position == 0:
            return segment_list.min_position
        if position < segment_list.min_position or position > segment_list.written_position:
            raise LogRangeError(f"the follower's log ends at {position}, outside this log "
                                f"[{segment_list.min_position}, {segment_list.written_position}]")
        if not self._record_starts_at(position):
            raise LogRangeError(f"the follower's log ends at {position}, which is not where a "
                                f"record starts in this log: they have diverged")
        return position

    def _record_starts_at(self, position: int) -> bool:
        segment = self._segment_list.find(position)
        if segment is None or position - segment.start_position >= segment.read_position:
            return True  # at the end (or past what is readable): nothing to compare yet
        if not segment.hold():
            return False
        try:
            return record_starts_at(segment.mapping, position - segment.start_position,
                                    physical_offset=position)
        finally:
            segment.release()

    @property
    def written_position(self) -> int:
        """Where this log ends (written, committed or not): followers' lag is measured here."""
        return self._segment_list.written_position

    # -- follower ------------------------------------------------------------------------
    def append_raw(self, position: int, data: bytes | bytearray | memoryview) -> int:
        """Append the master's bytes at exactly `position`; the new end.  See
        `CommitLog.append_raw` (ReplicationGapError, SegmentCreateError)."""
        assert self.role is BrokerRole.FOLLOWER, "only a follower appends raw bytes"
        return self._commitlog.append_raw(position, data)


def start_replication(config: StoreConfig, *, segment_list: SegmentList, commitlog: CommitLog,
                      commit_service: CommitService | None,
                      group_commit: GroupCommitService | None,
                      failure: Callable[[], str | None], on_fatal: FatalHandler,
                      ) -> tuple[Replication, PutAcknowledger, GroupTransferService | None]:
    """Build the role's part of a store: `Replication`, how puts are acknowledged, and (sync
    master) the group transfer service, which the store starts and stops with the others."""
    role = config.role
    progress = acknowledger = transfer = None
    if role.is_master:
        if role is BrokerRole.SYNC_MASTER:
            transfer = GroupTransferService(on_fatal=on_fatal)
        progress = FollowerPositions(
            on_replicated=transfer.replicated if transfer else lambda _position: None,
            on_no_follower=transfer.expire_all if transfer else lambda: None)
        if transfer is not None:
            acknowledger = FollowerAcknowledger(transfer, progress, config)
    flush = (SyncAcknowledger(group_commit, config, failure=failure)
             if group_commit is not None else None)
    replication = Replication(role=role, segment_list=segment_list, commitlog=commitlog,
                              commit_service=commit_service, progress=progress,
                              acknowledger=acknowledger)
    return replication, PutAcknowledger(flush=flush, follower=acknowledger), transfer
