"""Lookups by time, key and position: the reads that are not a pull by queue offset.

`offset_by_time` (RocketMQ `getOffsetInQueueByTime`) searches a consume queue by store time;
`key_matcher` is the exact check behind a key query (the index only gives candidates);
`message_at` decodes the record at a physical offset (RocketMQ `lookMessageByOffset`);
`iter_messages` walks the commit log in physical order.  A damaged record is never decoded
into a message: it raises `CorruptRecordError` naming where (get.py says how a pull answers
one instead).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

from ..files.segment import CommitLogSegment
from ..format import record
from ..format.message import StoredMessage, decode_stored
from ..format.padding import PADDING_TOPIC
from ..format.properties import PROPERTY_UNIQUE_KEY
from ..queues.consume_queue import ConsumeQueue
from .get import CorruptRecordError, FindSegment, NoRecordError


def offset_by_time(queue: ConsumeQueue, timestamp_ms: int, *,
                   find_segment: FindSegment) -> int:
    """Binary search of the queue for the first entry stored at or after `timestamp_ms`;
    entries whose record is gone count as older than any time."""
    low, high = queue.min_offset, queue.max_offset
    while low < high:
        middle = (low + high) // 2
        if _store_time(queue, middle, find_segment) < timestamp_ms:
            low = middle + 1
        else:
            high = middle
    return low


def _store_time(queue: ConsumeQueue, offset: int, find_segment: FindSegment) -> int:
    found = queue.read(offset, 1)
    if found is None:
        return -1
    queue_file, entries = found
    del found
    try:
        physical_offset = int(entries["physical_offset"][0])
    finally:
        del entries
        queue_file.release()
    segment = find_segment(physical_offset)
    if segment is None or not segment.hold():
        return -1
    try:
        _, head = record.decode_head(segment.mapping, physical_offset - segment.start_position)
        return head.store_timestamp_ms
    finally:
        segment.release()


def key_matcher(topic: str, key: str, *, message_at: Callable[[int], StoredMessage | None]
                ) -> Callable[[int], bool]:
    """The exact check behind a key query: the record at a candidate position belongs to
    `topic` and carries `key` among its KEYS or as its UNIQ_KEY."""

    def matches(physical_offset: int) -> bool:
        message = message_at(physical_offset)
        if message is None or message.topic != topic:
            return False
        return key in message.keys or message.properties.get(PROPERTY_UNIQUE_KEY) == key

    return matches


def message_at(find_segment: FindSegment, physical_offset: int, *,
               log_range: tuple[int, int], verify_crc: bool) -> StoredMessage:
    """Decode the record starting at `physical_offset` (`log_range` is for the error):
    `NoRecordError` where none starts, `CorruptRecordError` for one whose body fails its
    CRC (with `verify_crc`)."""
    segment = find_segment(physical_offset)
    if segment is None or not segment.hold():
        raise NoRecordError(f"no segment holds physical offset {physical_offset} "
                            f"(log is [{log_range[0]}, {log_range[1]}))")
    try:
        position = physical_offset - segment.start_position
        check = record.check_record(segment.mapping, position, limit=segment.read_position,
                                    expected_physical_offset=physical_offset, verify_crc=False)
        if check.status is not record.RecordCheck.OK:
            raise NoRecordError(f"no record starts at physical offset {physical_offset}: "
                                f"{check.reason or check.status.value}")
        message = decode_stored(segment.mapping, position)
        if verify_crc and record.body_crc(message.body) != message.body_crc:
            raise CorruptRecordError(f"the record at physical offset {physical_offset} is "
                                     f"damaged: its body fails its CRC")
        return message
    finally:
        segment.release()


def iter_messages(find_segment: FindSegment, start_position: int,
                  end_position: int, *, verify_crc: bool) -> Iterator[StoredMessage]:
    """Every message in [start_position, end_position), segment by segment, each held while
    it is read; a damaged record raises `CorruptRecordError` naming where."""
    position = start_position
    while position < end_position:
        segment = find_segment(position)
        if segment is None or not segment.hold():
            return
        try:
            position = yield from segment_messages(segment, position, end_position,
                                                   verify_crc=verify_crc)
        finally:
            segment.release()


def segment_messages(segment: CommitLogSegment, position: int, end: int, *,
                     verify_crc: bool) -> Generator[StoredMessage, None, int]:
    """Yield the records of one held segment from `position`; return where the scan ended."""
    limit = min(segment.read_position, end - segment.start_position)
    relative = position - segment.start_position
    while relative < limit:
        physical = segment.start_position + relative
        check = record.check_record(segment.mapping, relative, limit=segment.size_bytes,
                                    expected_physical_offset=physical, verify_crc=verify_crc)
        if check.status is record.RecordCheck.OK:
            message = decode_stored(segment.mapping, relative)
            if message.topic != PADDING_TOPIC:  # a group commit's filler (padding.py)
                yield message
            relative += check.size_bytes
        elif check.status is record.RecordCheck.BLANK:
            return segment.end_position
        else:
            raise CorruptRecordError(f"{segment.path}: damaged record at physical offset "
                                     f"{physical}: {check.reason or check.status.value}")
    return segment.start_position + relative

