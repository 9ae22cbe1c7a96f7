"""Crash recovery: find the end of the valid log, cut everything after it.

Every startup is one row of this decision table (`plan_recovery`):

| segments | abort marker | checkpoint       | mode     | CRC-verified from                        |
|----------|--------------|------------------|----------|------------------------------------------|
| none     | any          | any              | EMPTY    | nothing to verify                        |
| some     | absent       | valid or foreign | NORMAL   | the last recovery_segments_max segments  |
| some     | present      | valid or foreign | ABNORMAL | the newest segment whose first record's  |
|          |              |                  |          | store time ≤ checkpoint min time − 3 s   |
| some     | any          | missing/corrupt  | FULL     | the first segment                        |

Then one forward pass (`scan_log`) from the segment where the consume queues end (or the
verified window, if that starts earlier; segments below both are not read): records before
the window are checked structurally (magic, sizes, position) to find each queue's next
offset beyond what the consume queues hold; from the window on, each record's body CRC is
checked too.  The first record that fails inside the
window ends the log: its segment is cut there (and the rest of it zeroed) and every later
segment is deleted.  A failure before the window is reported, not acted on (RocketMQ does
not look there either).  `recover()` returns a report with the bytes truncated.
"""

from __future__ import annotations

import dataclasses
import enum
import logging

from ..files.checkpoint import CheckpointState, CheckpointValues
from ..files.mapped_file import last_nonzero_end
from ..files.segment import CommitLogSegment
from ..format import record
from ..format.padding import PADDING_TOPIC
from ..log.segment_list import SegmentList

log = logging.getLogger(__name__)


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
    end_position: int = 0
    truncated_bytes: int = 0
    """Bytes of the log dropped: from the valid end to the old end of written data."""
    deleted_segments: list[str] = dataclasses.field(default_factory=list)
    first_invalid_reason: str = ""
    unverified_problems: list[str] = dataclasses.field(default_factory=list)
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
    if not abort_present:
        return RecoveryReport(RecoveryMode.NORMAL, max(0, len(segments) - recovery_segments_max))
    return RecoveryReport(RecoveryMode.ABNORMAL,
                          _abnormal_start(segments, checkpoint.min_timestamp_ms))


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


def recover(segment_list: SegmentList, report: RecoveryReport,
            queue_offsets: dict[tuple[str, int], int], *,
            scan_from_position: int) -> RecoveryReport:
    """Scan, rebuild `queue_offsets` (for records from `scan_from_position` on), truncate;
    fills in and returns `report`."""
    end_position, old_end = scan_log(segment_list.segments, report, queue_offsets,
                                     scan_from_position=scan_from_position)
    report.end_position = end_position
    report.truncated_bytes = max(0, old_end - end_position)
    deleted = segment_list.truncate_after(end_position) if segment_list.segments else []
    report.deleted_segments = [path.name for path in deleted]
    if report.truncated_bytes:
        log.warning("recovery (%s) cut the log at %d: %d bytes dropped, %d segments deleted; "
                    "first invalid: %s", report.mode.value, end_position,
                    report.truncated_bytes, len(deleted), report.first_invalid_reason)
    return report


def scan_log(segments: list[CommitLogSegment], report: RecoveryReport,
             queue_offsets: dict[tuple[str, int], int], *,
             scan_from_position: int) -> tuple[int, int]:
    """Return (end of the valid log, end of whatever was written before the crash)."""
    end_position = segments[0].start_position if segments else 0
    for index, segment in enumerate(segments):
        verify = index >= report.verify_from_segment
        if not verify and segment.end_position <= scan_from_position:
            end_position = segment.end_position  # the consume queues hold its records
            continue
        outcome = _scan_segment(segment, verify_crc=verify, report=report,
                                queue_offsets=queue_offsets)
        if outcome.ok_through_end:
            end_position = segment.end_position
            continue
        if not verify:
            report.unverified_problems.append(outcome.reason)
            end_position = segment.end_position
            continue
        end_position = segment.start_position + outcome.valid_bytes
        report.first_invalid_reason = outcome.reason
        old_end = max(end_position, _written_end(segments[index:]))
        return end_position, old_end
    return end_position, end_position


@dataclasses.dataclass
class _SegmentOutcome:
    valid_bytes: int
    ok_through_end: bool
    reason: str = ""


def _scan_segment(segment: CommitLogSegment, *, verify_crc: bool, report: RecoveryReport,
                  queue_offsets: dict[tuple[str, int], int]) -> _SegmentOutcome:
    mapping = segment.mapping
    size = segment.size_bytes
    position = 0
    check = record.check_record
    while position < size:
        physical = segment.start_position + position
        result = check(mapping, position, limit=size, expected_physical_offset=physical,
                       verify_crc=verify_crc)
        if result.status is record.RecordCheck.OK:
            _note_record(mapping, position, result, queue_offsets=queue_offsets, report=report)
            position += result.size_bytes
            continue
        if result.status is record.RecordCheck.BLANK:
            return _SegmentOutcome(size, ok_through_end=True)
        reason = ("end of data" if result.status is record.RecordCheck.END
                  else f"{segment.path.name}@{position} (position {physical}): {result.reason}")
        return _SegmentOutcome(position, ok_through_end=False, reason=reason)
    return _SegmentOutcome(position, ok_through_end=True)


def _note_record(mapping: record.ReadableBuffer, position: int, result: record.CheckResult,
                 *, queue_offsets: dict[tuple[str, int], int], report: RecoveryReport) -> None:
    head = result.head
    assert head is not None
    report.records_scanned += 1
    report.last_store_timestamp_ms = head.store_timestamp_ms
    if head.sysflag & record.TRANSACTION_TYPE_MASK in (record.SysFlag.TRANSACTION_PREPARED,
                                                       record.SysFlag.TRANSACTION_ROLLBACK):
        return  # prepared/rollback records take no queue offset (RocketMQ's `CommitLog` too)
    assert result.layout is not None
    topic = _topic_of(mapping, position, result.layout, head)
    if topic == PADDING_TOPIC:
        return  # a group commit's filler takes no queue offset (padding.py)
    key = (topic, head.queue_id)
    if head.queue_offset + 1 > queue_offsets.get(key, 0):
        queue_offsets[key] = head.queue_offset + 1


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


def _written_end(segments: list[CommitLogSegment]) -> int:
    """How far bytes went before the crash: one past the last non-zero byte of the last
    segment holding anything (what truncation drops is counted up to it)."""
    for segment in reversed(segments):
        end = last_nonzero_end(segment.mapping, 0)
        if end:
            return segment.start_position + end
    return segments[0].start_position if segments else 0

