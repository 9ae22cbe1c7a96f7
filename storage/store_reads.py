"""`StoreReads`: the read half of `MessageStore`'s API (store.py holds the rest).

Every read goes through reads.py with the store's segments, consume queues and index; these
methods only check that the store is open and pass the store's bounds along.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from .config import StoreConfig
from .errors import StoreClosedError, StoreError
from .format.message import StoredMessage
from .index.index_service import IndexService
from .log.segment_list import SegmentList
from .queues.consume_queues import ConsumeQueues
from .reads import reads
from .reads.reads import GetResult, NoRecordError


class StoreReads:
    """Mixed into `MessageStore`, which sets these attributes at open."""

    directory: Path
    config: StoreConfig
    _segment_list: SegmentList
    _queues: ConsumeQueues
    _index: IndexService | None
    _closed: bool

    @property
    def min_position(self) -> int:
        return self._segment_list.min_position

    @property
    def committed_position(self) -> int:
        """Exclusive end of the readable log (committed bytes with the pool on)."""
        return self._segment_list.committed_position

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self.directory}: store is closed")

    # -- read ---------------------------------------------------------------------------
    def message_at(self, physical_offset: int) -> StoredMessage:
        """Decode the record starting at `physical_offset` (RocketMQ `lookMessageByOffset`)."""
        self._check_open()
        return reads.message_at(self._segment_list.find, physical_offset,
                                log_range=(self.min_position, self.committed_position))

    def iter_messages(self, start_position: int | None = None) -> Iterator[StoredMessage]:
        """Every message from `start_position` (a record start; default: the log's start) to
        the readable end, in physical order; BLANK records and group-commit fillers skipped."""
        self._check_open()
        start = self.min_position if start_position is None else start_position
        return reads.iter_messages(self._segment_list.find, start, self.committed_position)

    def get(self, topic: str, queue_id: int, offset: int, max_messages: int, *,
            tags: Sequence[str] | None = None) -> GetResult:
        """Up to `max_messages` from queue offset `offset` (RocketMQ `getMessage`); release
        the result when done.  `tags` filters by tag hash, then by exact tag."""
        self._check_open()
        return reads.get(self._queues.get(topic, queue_id), offset, max_messages, tags=tags,
                         find_segment=self._segment_list.find,
                         transfer_count_max=self.config.get_transfer_count_max,
                         transfer_bytes_max=self.config.get_transfer_bytes_max)

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get(topic, queue_id)
        return queue.min_offset if queue is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The next offset of the queue (exclusive), as dispatched so far."""
        queue = self._queues.get(topic, queue_id)
        return queue.max_offset if queue is not None else 0

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after `timestamp_ms` (the
        max offset if none was): where a consumer seeking to a time starts."""
        self._check_open()
        queue = self._queues.get(topic, queue_id)
        if queue is None:
            return 0
        return reads.offset_by_time(queue, timestamp_ms, find_segment=self._segment_list.find)

    def query_by_key(self, topic: str, key: str, begin_ms: int = 0, end_ms: int | None = None,
                     max_messages: int = 32) -> list[StoredMessage]:
        """Messages of `topic` whose KEYS (or UNIQ_KEY) include `key`, stored within
        [begin_ms, end_ms], oldest first.  Exact: a hash collision is never returned."""
        self._check_open()
        if self._index is None:
            raise StoreError("the index is disabled (index_enabled=false)")
        matches = reads.key_matcher(topic, key, message_at=self._message_at_or_none)
        positions = self._index.query(topic=topic, key=key, begin_ms=begin_ms,
                                      end_ms=(1 << 62) if end_ms is None else end_ms,
                                      max_results=max_messages, key_matches=matches)
        return [self.message_at(position) for position in positions]

    def _message_at_or_none(self, physical_offset: int) -> StoredMessage | None:
        try:
            return self.message_at(physical_offset)
        except NoRecordError:
            return None

