"""Dispatch's record walk: a run of whole records read at once, what dispatch needs of each.

Dispatch (storage/dispatch/dispatcher.py) walks the commit log record by record; for every
record it needs the few head fields a consume queue entry and the index take, the topic and
the properties.  `scan_records` reads a run of records into `DispatchRecord`s in one call,
stopping before the first record that is not whole (`check_record` says anything but OK:
the end of the written bytes, a BLANK, damage), at `end_position`, or after `records_max`
records.  The dispatcher handles the record it stopped at on its own path, as before.

`scan_records_reference` is the definition; `scan_records` is its C twin
(storage/format/_records.c) unless MQSTORE_NO_EXTENSIONS=1 (storage/format/compiled.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, cast

from . import compiled, record
from .properties import decode_properties
from .record import ReadableBuffer, RecordCheck, check_record, topic_and_properties


class DispatchRecord(NamedTuple):
    """One whole record as dispatch reads it: head fields, the topic (decoded as ASCII,
    undecodable bytes replaced) and the decoded properties."""

    physical_offset: int
    total_size: int
    queue_id: int
    queue_offset: int
    sysflag: int
    store_timestamp_ms: int
    topic: str
    properties: dict[str, str]


def scan_records_reference(buffer: ReadableBuffer, position: int, end_position: int,
                           limit: int, segment_start: int, records_max: int,
                           /) -> tuple[list[DispatchRecord], int]:
    """The whole records of `buffer` (a segment's bytes, valid up to `limit`, the segment
    starting at log position `segment_start`) from `position` on, while a record starts
    before `end_position` and fewer than `records_max` are read; returns them and the
    position after the last (where the walk stopped).  A record is whole when
    `check_record` (no body CRC, PHYSICALOFFSET `segment_start + position`) says OK."""
    records: list[DispatchRecord] = []
    while position < end_position and len(records) < records_max:
        result = check_record(buffer, position, limit=limit,
                              expected_physical_offset=segment_start + position,
                              verify_crc=False)
        if result.status is not RecordCheck.OK:
            break
        head, layout = result.head, result.layout
        assert head is not None
        assert layout is not None
        topic, properties = topic_and_properties(buffer, position, layout, head)
        records.append(DispatchRecord(
            head.physical_offset, head.total_size, head.queue_id, head.queue_offset,
            head.sysflag, head.store_timestamp_ms, topic.decode("ascii", "replace"),
            decode_properties(properties)))
        position += result.size_bytes
    return records, position


ScanRecords = Callable[[ReadableBuffer, int, int, int, int, int],
                       tuple[list[DispatchRecord], int]]


def compiled_scan_records() -> ScanRecords:
    """`scan_records_reference` in C, told the record type it builds; ImportError if the
    extension is not built.  It walks with the record layouts `check_record`'s C twin is
    told (storage/format/record.py), bound here first should `check_record` be the
    reference (a test binding the C twin while MQSTORE_NO_EXTENSIONS=1)."""
    if record.check_record is record.check_record_reference:
        record.compiled_check_record()
    return cast(ScanRecords, compiled.extension().bind_scan_records(scan_records_reference,
                                                                    DispatchRecord))


scan_records = compiled.pick(scan_records_reference, compiled_scan_records)
"""Read a run of whole records (`scan_records_reference`): the C twin, or the reference
itself when MQSTORE_NO_EXTENSIONS=1."""
