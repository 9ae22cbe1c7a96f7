"""Crash recovery: find the end of the valid log, never cut what is durable, report damage.

Every startup is one row of this decision table (`plan_recovery`):

| segments | abort marker | checkpoint       | mode     | CRC-verified from                        |
|----------|--------------|------------------|----------|------------------------------------------|
| none     | any          | any              | EMPTY    | nothing to verify                        |
| some     | absent       | valid or foreign | NORMAL   | the last recovery_segments_max segments  |
|          |              |                  |          | that hold data                           |
| some     | present      | valid or foreign | ABNORMAL | the newest segment whose first record's  |
|          |              |                  |          | store time ≤ checkpoint min time − 3 s   |
| some     | any          | missing/corrupt  | FULL     | the first segment                        |

Then one forward pass (`scan_log`) from the segment where the consume queues end (or the
verified window, if that starts earlier; segments below both are not read).  Records before
the window are checked structurally (magic, sizes, position), from the window on their body
CRC too.  The *durable position* is the flushed position the checkpoint recorded: every byte
below it was synced.  At each record:

| found at position p                          | what recovery does                        |
|----------------------------------------------|-------------------------------------------|
| a valid record                               | note its queue offset; go on              |
| BLANK                                        | the segment ends here; the next one       |
| zeros or a bad record, and a valid record    | damage [p, that record): reported, not    |
| follows (later in the segment, or a later    | cut; the walk goes on from the record     |
| segment holds data)                          | (record_scan.py finds it)                 |
| zeros or a bad record, nothing valid after   | the end of the log: cut at p.  Below the  |
|                                              | durable position that is damage too       |
|                                              | (synced bytes were lost): reported        |

So a damaged byte never costs the records after it (RocketMQ cuts at the first bad record
and loses them all), and only a tail that was never known synced is cut silently.  The
caller applies `corruption_policy` to what is reported (opening.py).  `recover()` returns a
report with the damage, the bytes truncated and the durable position.
"""

from __future__ import annotations

import dataclasses
import enum
import logging

from ..config import CorruptionPolicy
from ..errors import StoreCorruptError
from ..files.checkpoint import CheckpointState, CheckpointValues
from ..files.mapped_file import last_nonzero_end
from ..files.segment import CommitLogSegment
from ..format import record
from ..format.padding import PADDING_TOPIC
from ..format.record_scan import Damage, find_record
from ..log.segment_list import SegmentList

log = logging.getLogger(__name__)

QueueOffsets = dict[tuple[str, int], int]

TAIL_PROBE_BYTES = 8192
"""After a clean close, the bytes past the recorded end that must be zeros before recovery
trusts that nothing follows it (two pages: cheap, and any record torn there starts in them)."""


class RecoveryMode(enum.Enum):
    EMPTY = "empty"
    NORMAL = "normal"
    ABNORMAL = "abnormal"
    FULL = "full"


@dataclasses.dataclass
class RecoveryReport:
    mode: RecoveryMode
    verify_from_segment: int
    """Index of the first segment whose records were CRC-verified."""
    durable_position: int = 0
    """The flushed position the checkpoint recorded: below it recovery never cuts."""
    end_position: int = 0
    truncated_bytes: int = 0
    """Bytes of the log dropped: from the valid end to the old end of written data."""
    deleted_segments: list[str] = dataclasses.field(default_factory=list)
    first_invalid_reason: str = ""
    damage: list[Damage] = dataclasses.field(default_factory=list)
    """Damaged ranges found (never cut, but for a lost tail below the durable position)."""
    records_scanned: int = 0
    last_store_timestamp_ms: int = 0


def plan_recovery(segments: list[CommitLogSegment], *, abort_present: bool,
                  checkpoint_state: CheckpointState, checkpoint: CheckpointValues,
                  recovery_segments_max: int) -> RecoveryReport:
    """The decision table: which mode, and from which segment CRCs are verified."""
    if not segments:
        return RecoveryReport(RecoveryMode.EMPTY, 0)
    if checkpoint_state in (CheckpointState.MISSING, CheckpointState.CORRUPT):
        return RecoveryReport(RecoveryMode.FULL, 0)
    durable = checkpoint.master_flushed_offset
    if not abort_present:
        holding = data_segment_count(segments, durable_position=durable)
        return RecoveryReport(RecoveryMode.NORMAL, max(0, holding - recovery_segments_max),
                              durable_position=durable)
    return RecoveryReport(RecoveryMode.ABNORMAL,
                          _abnormal_start(segments, checkpoint.min_timestamp_ms),
                          durable_position=durable)


def data_segment_count(segments: list[CommitLogSegment], *, durable_position: int) -> int:
    """How many leading segments hold data: up to the last one that starts with a record
    header or starts below the durable position (segments fill in order, so every one
    before a segment with data had data; trailing preallocated ones are empty)."""
    for index in range(len(segments) - 1, -1, -1):
        segment = segments[index]
        if segment.start_position < durable_position or any(
                segment.mapping[:record.BLANK_SIZE_BYTES]):
            return index + 1
    return 0


def _abnormal_start(segments: list[CommitLogSegment], min_timestamp_ms: int) -> int:
    """RocketMQ `recoverAbnormally`: scan back for the newest segment whose first record is
    a message stored no later than the checkpoint says was safe; fall back to the first."""
    for index in range(len(segments) - 1, -1, -1):
        mapping = segments[index].mapping
        _, magic = record._SIZE_AND_MAGIC.unpack_from(mapping, 0)
        if magic not in (record.MAGIC_V1, record.MAGIC_V2):
            continue
        _, head = record.decode_head(mapping, 0)
        if 0 < head.store_timestamp_ms <= min_timestamp_ms:
            return index
    return 0


def recover(segment_list: SegmentList, report: RecoveryReport, queue_offsets: QueueOffsets, *,
            scan_from_position: int, policy: CorruptionPolicy) -> RecoveryReport:
    """Scan, rebuild `queue_offsets` (for records from `scan_from_position` on), apply
    `policy` to the damage found, cut the tail; fills in and returns `report`.  Under REFUSE
    damage raises `StoreCorruptError` before anything is changed."""
    scan = _LogScan(segment_list.segments, report, queue_offsets)
    end_position, written_end = scan.run(scan_from_position=scan_from_position)
    report.end_position = end_position
    report.truncated_bytes = max(0, written_end - end_position)
    if report.damage and policy is CorruptionPolicy.REFUSE:
        raise StoreCorruptError(
            f"{segment_list.directory}: {len(report.damage)} damaged ranges in the commit log "
            f"(corruption_policy=refuse): " + "; ".join(map(str, report.damage[:5])))
    deleted = (segment_list.truncate_after(end_position, written_end=written_end)
               if segment_list.segments else [])
    report.deleted_segments = [path.name for path in deleted]
    for damage in report.damage:
        log.error("recovery (%s) found damage in the commit log at %s; the records around it "
                  "are kept (corruption_policy=skip)", report.mode.value, damage)
    if report.truncated_bytes:
        log.warning("recovery (%s) cut the log at %d: %d bytes dropped, %d segments deleted; "
                    "first invalid: %s", report.mode.value, end_position,
                    report.truncated_bytes, len(deleted), report.first_invalid_reason)
    return report


class _LogScan:
    """One forward walk of the segments (the module docstring's table)."""

    def __init__(self, segments: list[CommitLogSegment], report: RecoveryReport,
                 queue_offsets: QueueOffsets) -> None:
        self._segments = segments
        self._report = report
        self._queue_offsets = queue_offsets
        self._holding = data_segment_count(segments, durable_position=report.durable_position)

    def run(self, *, scan_from_position: int) -> tuple[int, int]:
        """(end of the valid log, end of whatever was written before: what a cut drops)."""
        segments, report = self._segments, self._report
        end_position = segments[0].start_position if segments else 0
        for index, segment in enumerate(segments[:self._holding]):
            verify = index >= report.verify_from_segment
            if not verify and segment.end_position <= scan_from_position:
                end_position = segment.end_position  # the consume queues hold its records
                continue
            tail = self._scan_segment(index, verify_crc=verify)
            if tail is None:
                end_position = segment.end_position
                continue
            position, written_end = tail
            end_position = segment.start_position + position
            if end_position < report.durable_position:
                report.damage.append(Damage(end_position, report.durable_position,
                                            f"the log ends at {end_position}, below the "
                                            f"durable position: synced bytes were lost"))
            return end_position, segment.start_position + written_end
        return end_position, end_position

    def _scan_segment(self, index: int, *, verify_crc: bool) -> tuple[int, int] | None:
        """Walk one segment; None if it is whole to its end (damage skipped), else (where the
        log ends in it, where its written bytes end)."""
        segment = self._segments[index]
        mapping, size, start = segment.mapping, segment.size_bytes, segment.start_position
        position = 0
        while position < size:
            result = record.check_record(mapping, position, limit=size,
                                         expected_physical_offset=start + position,
                                         verify_crc=verify_crc)
            if result.status is record.RecordCheck.OK:
                self._note_record(mapping, position, result)
                position += result.size_bytes
                continue
            if result.status is record.RecordCheck.BLANK:
                return None
            reason = ("zeros where a record was due" if result.status is record.RecordCheck.END
                      else result.reason)
            resumed, written_end = self._resume_after(index, position, reason=reason)
            if resumed is None:
                self._report.first_invalid_reason = (
                    "end of data" if result.status is record.RecordCheck.END
                    else f"{segment.path.name}@{position} (position {start + position}): "
                         f"{reason}")
                return position, written_end
            if resumed >= size:
                return None
            position = resumed
        return None

    def _resume_after(self, index: int, position: int, *,
                      reason: str) -> tuple[int | None, int]:
        """Where valid records resume after a failure at `position` of segment `index` (the
        segment's size: in a later segment), recording the damage, or None if nothing valid
        follows; and where the segment's written bytes end."""
        segment = self._segments[index]
        start, size = segment.start_position, segment.size_bytes
        report = self._report
        if (report.mode is RecoveryMode.NORMAL and report.durable_position == start + position
                and index + 1 >= self._holding
                and not any(segment.mapping[position:position + TAIL_PROBE_BYTES])):
            # A clean close recorded exactly this end and the bytes after it are zeros:
            # nothing was written after it, and the (costly, a page at a time) search for
            # written bytes is not needed.  Bytes there (a copy torn by damage, garbage) get
            # the search, and are zeroed by the cut.
            return None, position
        written_end = last_nonzero_end(segment.mapping, position)
        found = None
        if written_end > position:
            found = find_record(segment.mapping, position + 1, written_end, limit=size,
                                segment_start=start)
        if found is None and index + 1 >= self._holding:
            return None, written_end
        resumed = size if found is None else found
        self._report.damage.append(Damage(start + position, start + resumed, reason))
        return resumed, written_end

    def _note_record(self, mapping: record.ReadableBuffer, position: int,
                     result: record.CheckResult) -> None:
        head = result.head
        assert head is not None
        report = self._report
        report.records_scanned += 1
        report.last_store_timestamp_ms = head.store_timestamp_ms
        if not record.takes_queue_offset(head.sysflag):
            return  # prepared/rollback records take no queue offset (RocketMQ's CommitLog)
        assert result.layout is not None
        topic = _topic_of(mapping, position, result.layout, head)
        if topic == PADDING_TOPIC:
            return  # a group commit's filler takes no queue offset (padding.py)
        key = (topic, head.queue_id)
        if head.queue_offset + 1 > self._queue_offsets.get(key, 0):
            self._queue_offsets[key] = head.queue_offset + 1


def _topic_of(mapping: record.ReadableBuffer, position: int, layout: record.RecordLayout,
              head: record.RecordHead) -> str:
    cursor = position + layout.body_offset + head.body_size_bytes
    (length,) = layout.topic_length.unpack_from(mapping, cursor)
    start = cursor + layout.topic_length.size
    view = memoryview(mapping)
    try:
        return bytes(view[start:start + length]).decode("ascii", "replace")
    finally:
        view.release()
