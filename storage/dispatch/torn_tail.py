"""Cut a consume queue entry the indexer's own kill -9 may have torn.

An entry is written with one 20-byte copy into the mapping.  A process killed inside that
copy leaves a prefix of the new bytes in the page cache: a physical offset or a size that
belongs to no record.  Only the last entry of a queue can be torn (entries are appended one
at a time), so at open the last entry of every queue is checked against the commit log: a
record must start at its physical offset, with its size and its queue offset.  An entry that
fails is cut; dispatch then writes it again from the log.

An entry whose record lies wholly below the log's first segment is not torn but expired:
retention deleted its segment (a queue none wrote to since).  It has a size: the offset's 8
bytes are written before the size's 4, so a torn offset comes with a zero size.  Cutting it
would lower the queue's end below the writer's count, and no dispatch could write it again.
"""

from __future__ import annotations

import os

from ..files.consume_queue_file import ENTRY_SIZE_BYTES, is_filler
from ..format import record
from ..format.volume import parse_offset_file_name
from ..log.reader import CommitLogReader
from ..queues.consume_queue import ConsumeQueue
from ..queues.consume_queues import ConsumeQueues


def cut_torn_queue_tails(queues: ConsumeQueues, reader: CommitLogReader) -> int:
    """Check the last entry of every queue; cut those that match no record.  Returns how
    many queues were cut."""
    cut = 0
    log_start = _first_segment_start(reader)
    for queue in queues:
        last = _last_entry(queue)
        if last is None:
            continue
        physical_offset, size_bytes = last
        if log_start is not None and size_bytes > 0 and \
                physical_offset + size_bytes <= log_start:
            continue  # expired with its segment
        if not _holds_entry(reader, physical_offset, size_bytes, queue_id=queue.queue_id,
                            queue_offset=queue.max_offset - 1):
            queue.truncate_to_physical(physical_offset)
            cut += 1
    return cut


def _first_segment_start(reader: CommitLogReader) -> int | None:
    """Where the oldest segment file starts (None: no segment yet)."""
    try:
        names = os.listdir(reader.directory)
    except FileNotFoundError:
        return None
    return min((start for start in map(parse_offset_file_name, names) if start is not None),
               default=None)


def _last_entry(queue: ConsumeQueue) -> tuple[int, int] | None:
    if not queue.files or queue.max_offset == 0:
        return None
    last = queue.files[-1]
    if last.written_position == 0:
        return None
    physical_offset, size_bytes, _ = last.entry(last.written_position - ENTRY_SIZE_BYTES)
    if is_filler(physical_offset, size_bytes):
        return None
    return physical_offset, size_bytes


def _holds_entry(reader: CommitLogReader, physical_offset: int, size_bytes: int, *,
                 queue_id: int, queue_offset: int) -> bool:
    segment = reader.find(physical_offset)
    if segment is None or not segment.hold():
        return False
    try:
        return record.holds_entry(segment.mapping, physical_offset - segment.start_position,
                                  limit=segment.size_bytes, physical_offset=physical_offset,
                                  size_bytes=size_bytes, queue_id=queue_id,
                                  queue_offset=queue_offset)
    finally:
        segment.release()
