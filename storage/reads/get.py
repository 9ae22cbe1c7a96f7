"""Reads: `get` by queue offset with RocketMQ's pull statuses (lookups.py has the others).

`get` (RocketMQ `DefaultMessageStore.getMessage`), with min/max the queue's offsets (max exclusive):

| case                          | status                 | next_offset               |
|-------------------------------|------------------------|---------------------------|
| max == 0                      | NO_MESSAGE_IN_QUEUE    | 0                         |
| offset < min                  | OFFSET_TOO_SMALL       | min                       |
| offset == max                 | OFFSET_OVERFLOW_ONE    | offset                    |
| offset > max                  | OFFSET_OVERFLOW_BADLY  | max                       |
| entries unreadable            | OFFSET_FOUND_NULL      | the next file's first     |
| scan found messages           | FOUND                  | offset + entries scanned  |
| scan found none (a filter)    | NO_MATCHED_MESSAGE     | offset + entries scanned  |
| records gone (retention)      | MESSAGE_WAS_REMOVING   | offset + entries scanned  |
| first record damaged          | MESSAGE_CORRUPT        | past the damaged one      |

A damaged record (it fails its structure check, or its body CRC when reads verify it) is
never served: met first, it is the answer (`reason` says where and why) and the next get
starts after it; met after messages were collected, the get ends before it.  The damaged
entries dispatch writes for records lost in damaged bytes (dispatcher.py) answer the same.

Filters: `tags` skips entries by the consume queue's tags code, then checks the exact tag;
`property_filter` (a SQL92 filter: filters/sql92.py) is asked about each candidate's whole
property map, and only what it calls True is kept (RocketMQ's `isMatchedByCommitLog`).  Only
a read with either decodes a record's properties; `records_only` with neither decodes
nothing.

Messages are served from the mapped segments without copying: each body (and each whole
record, for a server that sends bytes unchanged) is a memoryview into a held segment, valid
until the result is released (`with store.get(...) as result:`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType

from ..errors import StoreCorruptError, StoreError
from ..files.consume_queue_file import (
    DAMAGED_TAGS_CODE,
    ENTRY_SIZE_BYTES,
    Entries,
    is_filler,
)
from ..files.segment import CommitLogSegment
from ..format import record
from ..format.java_hash import java_string_hash
from ..format.message import StoredMessage
from ..format.properties import PROPERTY_TAGS, decode_properties
from ..format.subscription import TagFilter, parse_tags
from ..queues.consume_queue import ConsumeQueue


class NoRecordError(StoreError, LookupError):
    """No readable record starts at the given physical offset."""


class NotDispatchedError(NoRecordError):
    """A record starts at the given physical offset, but its consume queue has no entry for
    it yet (the indexer has not dispatched it): it cannot be told from a record that some
    message's body carries, so it is not served until it is dispatched."""


SCAN_BYTES_MIN = 16_000
"""RocketMQ scans at least 16,000 bytes of consume queue (800 entries) per get."""

FindSegment = Callable[[int], CommitLogSegment | None]
PropertyFilter = Callable[[Mapping[str, str]], bool]
"""Whether a message with this full stored property map is served (a compiled SQL92
expression, filters/sql92.py, is one)."""


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    MESSAGE_CORRUPT = "MESSAGE_CORRUPT"
    """mqstore's own: the message at next_offset - 1 is damaged on disk (`reason`)."""


class CorruptRecordError(StoreCorruptError):
    """A record is where one was asked for, but damaged (structure or body CRC): never
    decoded into a message."""


class GetResult:
    """Status, offsets and messages of one get; release it (or use `with`) when done."""

    def __init__(self, status: GetStatus, *, next_offset: int, min_offset: int,
                 max_offset: int) -> None:
        self.status = status
        self.next_offset = next_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.reason = ""
        """Why, for MESSAGE_CORRUPT: where the damaged record is and what is wrong."""
        self.messages: list[StoredMessage] = []
        self.records: list[memoryview] = []
        """Each message's whole record, as stored (what a server sends unchanged)."""
        self._held: list[CommitLogSegment] = []

    def hold(self, segment: CommitLogSegment) -> None:
        """Keep a reference the caller took on `segment` until `release`."""
        self._held.append(segment)

    def release(self) -> None:
        for message in self.messages:
            if isinstance(message.body, memoryview):
                message.body.release()
        for view in self.records:
            view.release()
        self.records.clear()
        for segment in self._held:
            segment.release()
        self._held.clear()

    def __enter__(self) -> GetResult:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        return (f"GetResult({self.status.name}, next_offset={self.next_offset}, "
                f"min={self.min_offset}, max={self.max_offset}, "
                f"messages={len(self.messages)})")


def get(queue: ConsumeQueue | None, offset: int, max_messages: int, *,
        tags: TagFilter, find_segment: FindSegment, transfer_count_max: int,
        transfer_bytes_max: int, verify_crc: bool, records_only: bool = False,
        property_filter: PropertyFilter | None = None) -> GetResult:
    """`records_only`: fill `records` only, decoding no message (a server that sends the
    stored bytes as they are); a filter still decodes each candidate's properties."""
    tags = parse_tags(tags)  # before anything is read: a bad expression reads nothing
    min_offset = queue.min_offset if queue is not None else 0
    max_offset = queue.max_offset if queue is not None else 0
    status, next_offset = _bounds_status(offset, min_offset, max_offset)
    result = GetResult(status or GetStatus.FOUND, next_offset=next_offset,
                       min_offset=min_offset, max_offset=max_offset)
    if status is not None or queue is None:
        return result
    count_max = max(SCAN_BYTES_MIN, max_messages * ENTRY_SIZE_BYTES) // ENTRY_SIZE_BYTES
    found = queue.read(offset, count_max)
    if found is None:
        result.status = GetStatus.OFFSET_FOUND_NULL
        result.next_offset = _next_file_offset(queue, offset)
        return result
    queue_file, entries = found
    del found  # the view must have no other reference when the file is released
    try:
        limits = (min(max_messages, transfer_count_max), transfer_bytes_max)
        scanned = _scan(entries, result, limits=limits, tags=tags, find_segment=find_segment,
                        first_offset=offset, queue_id=queue.queue_id, verify_crc=verify_crc,
                        records_only=records_only, property_filter=property_filter)
    finally:
        del entries
        queue_file.release()
    result.next_offset = offset + scanned
    return result


def _bounds_status(offset: int, min_offset: int,
                   max_offset: int) -> tuple[GetStatus | None, int]:
    if max_offset == 0:
        return GetStatus.NO_MESSAGE_IN_QUEUE, 0
    if offset < min_offset:
        return GetStatus.OFFSET_TOO_SMALL, min_offset
    if offset == max_offset:
        return GetStatus.OFFSET_OVERFLOW_ONE, offset
    if offset > max_offset:
        return GetStatus.OFFSET_OVERFLOW_BADLY, max_offset
    return None, offset


def _next_file_offset(queue: ConsumeQueue, offset: int) -> int:
    position = offset * ENTRY_SIZE_BYTES
    return (position - position % queue.file_size_bytes + queue.file_size_bytes) \
        // ENTRY_SIZE_BYTES


def _scan(entries: Entries, result: GetResult, *, limits: tuple[int, int],
          tags: Sequence[str] | None, find_segment: FindSegment, first_offset: int,
          queue_id: int, verify_crc: bool, records_only: bool,
          property_filter: PropertyFilter | None) -> int:
    """Collect matching records (and messages); return how many entries were consumed."""
    count_max, bytes_max = limits
    decode = not records_only or bool(tags) or property_filter is not None
    records = result.records
    wanted = {java_string_hash(tag) for tag in tags} if tags else None
    physical_offsets = entries["physical_offset"].tolist()
    sizes = entries["size"].tolist()
    codes = entries["tags_code"].tolist()
    total_bytes = 0
    removed = False
    for index, (physical_offset, size) in enumerate(zip(physical_offsets, sizes, strict=True)):
        if len(records) >= count_max or (records and total_bytes + size > bytes_max):
            return index
        if is_filler(physical_offset, size):
            continue
        damage = None
        if codes[index] == DAMAGED_TAGS_CODE:
            damage = "its record was lost in damaged bytes of the commit log"
        elif wanted is not None and codes[index] not in wanted:
            continue
        read = (damage if damage is not None else
                _read_message(physical_offset, find_segment, verify_crc=verify_crc,
                              queue_id=queue_id, queue_offset=first_offset + index,
                              decode=decode))
        if read is None:
            removed = True
            continue
        if isinstance(read, str):
            if records:
                return index  # served up to the damaged record; the next get answers it
            result.status = GetStatus.MESSAGE_CORRUPT
            result.reason = (f"queue offset {first_offset + index} (physical offset "
                             f"{physical_offset}): {read}")
            return index + 1
        message, record_view, segment = read
        if tags and message is not None and message.properties.get(PROPERTY_TAGS) not in tags:
            _drop(message, record_view, segment)  # a tag hash collision: exact check fails
            continue
        if property_filter is not None and message is not None and \
                not property_filter(message.properties):
            _drop(message, record_view, segment)
            continue
        _keep(result, message, record_view, segment, records_only=records_only)
        total_bytes += size
    if not records:
        result.status = (GetStatus.MESSAGE_WAS_REMOVING if removed
                         else GetStatus.NO_MATCHED_MESSAGE)
    return len(physical_offsets)


def _read_message(physical_offset: int, find_segment: FindSegment, *, verify_crc: bool,
                  queue_id: int, queue_offset: int, decode: bool = True
                  ) -> tuple[StoredMessage | None, memoryview, CommitLogSegment] | str | None:
    """The record at `physical_offset` with a zero-copy body, its segment held; None if the
    segment is gone (retention); what is wrong, if the record there is damaged or is not
    the one the entry (`queue_id`, `queue_offset`) describes."""
    segment = find_segment(physical_offset)
    if segment is None or not segment.hold():
        return None
    position = physical_offset - segment.start_position
    check = record.check_record(segment.mapping, position, limit=segment.read_position,
                                expected_physical_offset=physical_offset, verify_crc=verify_crc)
    head = check.head
    problem = None
    if check.status is not record.RecordCheck.OK:
        problem = f"the record there is damaged: {check.reason or 'zeros'}"
    elif head is not None and (head.queue_offset, head.queue_id) != (queue_offset, queue_id):
        problem = (f"the consume queue entry is damaged: the record there is queue "
                   f"{head.queue_id} offset {head.queue_offset}")
    if problem is not None:
        segment.release()
        return problem
    assert check.head is not None
    assert check.layout is not None
    with memoryview(segment.mapping) as view:
        record_view = view[position:position + check.size_bytes]
        if not decode:
            return None, record_view, segment
        body, topic, properties = record.decode_variable(view, position, check.layout,
                                                         check.head)
    message = StoredMessage(check.head, body=body, topic=topic.decode("ascii", "replace"),
                            properties=decode_properties(properties))
    return message, record_view, segment


def _keep(result: GetResult, message: StoredMessage | None, record_view: memoryview,
          segment: CommitLogSegment, *, records_only: bool) -> None:
    if not records_only:
        assert message is not None
        result.messages.append(message)
    elif message is not None and isinstance(message.body, memoryview):
        message.body.release()  # decoded for a filter only
    result.records.append(record_view)
    result.hold(segment)


def _drop(message: StoredMessage | None, record_view: memoryview,
          segment: CommitLogSegment) -> None:
    if message is not None and isinstance(message.body, memoryview):
        message.body.release()
    record_view.release()
    segment.release()
