"""`BatchGuess`: where a batch expects to land, read without the put lock.

`CommitLog.put_batch` packs a batch's records with the offsets this predicts (the active
segment's end and each queue's next offset), so that under the lock, when no other writer
came in between, the append is one copy (commitlog.py).
"""

from __future__ import annotations

import time

from ..files.segment import CommitLogSegment
from ..format.record import BLANK_SIZE_BYTES

QueueKey = tuple[str, int]

_RESERVE = BLANK_SIZE_BYTES
_time_ns = time.time_ns


class BatchGuess:
    """Where a batch expects to land, read without the lock; `holds` checks it under it."""

    __slots__ = ("first_offsets", "next_offsets", "physical_offset", "position",
                 "queue_offsets", "segment", "store_timestamp_ms")

    def __init__(self, segment: CommitLogSegment | None,
                 queue_offsets: dict[QueueKey, int]) -> None:
        self.segment = segment
        self.position = segment.written_position if segment is not None else 0
        self.physical_offset = (segment.start_position + self.position
                                if segment is not None else 0)
        self.queue_offsets = queue_offsets
        self.first_offsets: dict[QueueKey, int] = {}
        """Each queue's next offset as read (unlocked) before the batch."""
        self.next_offsets: dict[QueueKey, int] = {}
        """Each queue's next offset after the batch, as guessed."""
        self.store_timestamp_ms = _time_ns() // 1_000_000

    def first_offset(self, key: QueueKey) -> int:
        offset = self.queue_offsets.get(key, 0)
        self.first_offsets[key] = offset
        return offset

    def holds(self, segment: CommitLogSegment | None, queue_offsets: dict[QueueKey, int],
              size_bytes: int) -> bool:
        """Under the put lock: nothing was appended since the guess and the batch fits."""
        if segment is None or segment is not self.segment:
            return False
        if segment.written_position != self.position:
            return False
        if segment.size_bytes - self.position < size_bytes + _RESERVE:
            return False
        return all(queue_offsets.get(key, 0) == first
                   for key, first in self.first_offsets.items())
