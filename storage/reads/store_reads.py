"""`StoreReads`: the read API over one store's files, whoever writes them.

`MessageStore` (its own segment list, consume queues and index) and `StoreView` (a directory
other processes write, mapped read-only) both serve their reads through one of these, so a
read answers the same statuses and next offsets wherever it runs (get.py).  The owner
passes where each piece comes from:

    find_segment(position)   the segment holding a position (None if gone or not written)
    log_range()              (start, committed end) of the readable log
    queue(topic, queue id)   the consume queue, or None if it does not exist (yet)
    index                    the key index, or None (index_enabled=false)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Protocol

from ..config import StoreConfig
from ..errors import StoreError
from ..format.message import StoredMessage
from ..format.subscription import TagFilter
from ..index.index_service import INDEX_TAG_TYPE
from ..queues.consume_queue import ConsumeQueue
from . import get as reads
from . import lookups
from .get import (
    CorruptRecordError,
    FindSegment,
    GetResult,
    GetStatus,
    NoRecordError,
    PropertyFilter,
)

log = logging.getLogger(__name__)

QUERY_END_MS = 1 << 62
"""A key query with no end time covers every store time."""


class KeyIndex(Protocol):
    """`IndexService` (the writer's or the indexer's) and `IndexReader` (read-only)."""

    def query(self, *, topic: str, key: str, begin_ms: int, end_ms: int, max_results: int,
              key_matches: Callable[[int], bool],
              index_type: str | None = None) -> list[int]: ...


DAMAGE_LOGGED_MAX = 1024
"""Damaged places each logged once at ERROR (then only counted): a consumer retrying one
damaged offset must not flood the log."""


class StoreReads:
    def __init__(self, config: StoreConfig, *, find_segment: FindSegment,
                 log_range: Callable[[], tuple[int, int]],
                 queue: Callable[[str, int], ConsumeQueue | None],
                 index: KeyIndex | None) -> None:
        self._config = config
        self._find_segment = find_segment
        self._log_range = log_range
        self._queue = queue
        self.index = index
        self.damaged_reads_total = 0
        """Reads that met a damaged record (MESSAGE_CORRUPT, CorruptRecordError)."""
        self._damage_logged: set[str] = set()

    def message_at(self, physical_offset: int) -> StoredMessage:
        """Decode the record starting at `physical_offset` (RocketMQ `lookMessageByOffset`);
        `NoRecordError` if no readable record starts there."""
        try:
            return lookups.message_at(self._find_segment, physical_offset,
                                    log_range=self._log_range(),
                                    verify_crc=self._config.read_verify_crc)
        except CorruptRecordError as error:
            self._report_damage(str(error))
            raise

    def iter_messages(self, start_position: int | None = None) -> Iterator[StoredMessage]:
        """Every message from `start_position` (a record start; default: the log's start) to
        the committed end, in physical order; BLANK records and group-commit fillers
        skipped."""
        start, end = self._log_range()
        return lookups.iter_messages(self._find_segment,
                                   start if start_position is None else start_position, end,
                                   verify_crc=self._config.read_verify_crc)

    def get(self, topic: str, queue_id: int, offset: int, max_messages: int, *,
            tags: TagFilter = None, records_only: bool = False,
            property_filter: PropertyFilter | None = None) -> GetResult:
        """Up to `max_messages` from queue offset `offset` (RocketMQ `getMessage`); release
        the result when done.  `tags` filters by tag hash, then by exact tag: an expression
        ("TagA || TagB", "*") or a sequence of tags; `SubscriptionExpressionError` for an
        expression it cannot parse.  `property_filter`: only messages whose property map it
        calls True (a SQL92 filter, `compile_sql92`).  `records_only`: only `records` (no
        decoded messages)."""
        result = reads.get(self._queue(topic, queue_id), offset, max_messages, tags=tags,
                           records_only=records_only, property_filter=property_filter,
                           find_segment=self._find_segment,
                           transfer_count_max=self._config.get_transfer_count_max,
                           transfer_bytes_max=self._config.get_transfer_bytes_max,
                           verify_crc=self._config.read_verify_crc)
        if result.status is GetStatus.MESSAGE_CORRUPT:
            self._report_damage(f"{topic}/{queue_id}: {result.reason}")
        return result

    def _report_damage(self, what: str) -> None:
        """Count a read that met damage; log each damaged place once (bounded)."""
        self.damaged_reads_total += 1
        if what not in self._damage_logged and len(self._damage_logged) < DAMAGE_LOGGED_MAX:
            self._damage_logged.add(what)
            log.error("a read met damage and served none of it: %s", what)

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queue(topic, queue_id)
        return queue.min_offset if queue is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The next offset of the queue (exclusive), as far as it is readable."""
        queue = self._queue(topic, queue_id)
        return queue.max_offset if queue is not None else 0

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after `timestamp_ms` (the
        max offset if none was): where a consumer seeking to a time starts."""
        queue = self._queue(topic, queue_id)
        if queue is None:
            return 0
        return lookups.offset_by_time(queue, timestamp_ms, find_segment=self._find_segment)

    def query_by_key(self, topic: str, key: str, begin_ms: int = 0, end_ms: int | None = None,
                     max_messages: int = 32) -> list[StoredMessage]:
        """Messages of `topic` whose KEYS (or UNIQ_KEY) include `key`, stored within
        [begin_ms, end_ms], oldest first.  Exact: a hash collision is never returned."""
        if self.index is None:
            raise StoreError("the index is disabled (index_enabled=false)")
        matches = lookups.key_matcher(topic, key, message_at=self._decoded_or_none)
        positions = self.index.query(topic=topic, key=key, begin_ms=begin_ms,
                                     end_ms=QUERY_END_MS if end_ms is None else end_ms,
                                     max_results=max_messages, key_matches=matches)
        return [self.message_at(position) for position in positions]

    def query_by_tag(self, topic: str, tag: str, begin_ms: int = 0, end_ms: int | None = None,
                     max_messages: int = 32) -> list[StoredMessage]:
        """Messages of `topic` whose TAGS are exactly `tag`, from the index's tag entries
        (`topic#T#<tags>`, as RocketMQ 5 writes them): oldest first, exact."""
        if self.index is None:
            raise StoreError("the index is disabled (index_enabled=false)")

        def matches(physical_offset: int) -> bool:
            message = self._decoded_or_none(physical_offset)
            return message is not None and message.topic == topic and message.tags == tag

        positions = self.index.query(topic=topic, key=tag, begin_ms=begin_ms,
                                     end_ms=QUERY_END_MS if end_ms is None else end_ms,
                                     max_results=max_messages, key_matches=matches,
                                     index_type=INDEX_TAG_TYPE)
        return [self.message_at(position) for position in positions]

    def _decoded_or_none(self, physical_offset: int) -> StoredMessage | None:
        """A key candidate decoded without its body's CRC (keys live in the properties): a
        match whose body is damaged then fails in `message_at`, loudly."""
        try:
            return lookups.message_at(self._find_segment, physical_offset,
                                    log_range=self._log_range(), verify_crc=False)
        except NoRecordError:
            return None
