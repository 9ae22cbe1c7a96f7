"""`StoreView`: a read-only view of a store directory that other processes write.

    <directory>/positions        the writer's watermarks: committed end, log start (read)
    <directory>/dispatched       how far the indexer's consume queues are written (read)
    <directory>/commitlog/       segments, mapped read-only (log_view.py)
    <directory>/consumequeue/    consume queues, mapped read-only (queues/queue_view.py)
    <directory>/index/           index files, mapped read-only (index/reader.py)

The pull-notifier serves consumers through this.  It takes no lock and writes nothing, so
any number of views (notifier replicas) can read one directory beside the writer and the
indexer.  Reads answer as `MessageStore`'s do (same `store_reads.py` code, same statuses and
next-offset rules); what differs is how the view learns what is readable:

| source                              | call                 | moves                          |
|-------------------------------------|----------------------|--------------------------------|
| indexer notice "advanced"           | `advance(notices)`   | queue max offsets, up only     |
| indexer snapshot (each (re)connect) | `apply_snapshot(..)` | queue min and max, max also down|
| `dispatched` + directory listings   | `refresh()`          | max offsets up; new queues;    |
|                                     |                      | files retention deleted        |
| `positions`                         | each of the above    | log start and committed end    |

A consume queue entry is read only below a max offset one of these vouched for, and a record
only below the committed end the writer published.  When a new writer generation recovered the
log to an end below what was readable (a machine crash lost committed bytes), the indexer cuts
its queues back; the view forgets every queue and relearns them from notices, and from
`dispatched` once the indexer has followed the new generation.

Not thread-safe: one thread (the notifier's event loop) makes every call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from ..config import StoreConfig
from ..errors import StoreFormatError
from ..files.watermarks import DispatchedFile, PositionsFile, WatermarkFile
from ..format import record
from ..format.message import StoredMessage
from ..format.subscription import TagFilter
from ..format.volume import (
    COMMITLOG_DIRECTORY,
    CONSUME_QUEUE_DIRECTORY,
    DISPATCHED_FILE,
    INDEX_DIRECTORY,
    POSITIONS_FILE,
)
from ..index.reader import IndexReader
from ..queues.queue_view import QueueView
from ..queues.reader import RecordMatches
from ..store_sizes import embedded_config
from .get import GetResult, NoRecordError, NotDispatchedError, PropertyFilter
from .log_view import LogView
from .store_reads import StoreReads

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]


class QueueInfo(NamedTuple):
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    """Exclusive: the next offset to be written."""


class StoreView:
    """Use `StoreView.open(directory, config)`; `close()` when done."""

    def __init__(self, directory: Path, config: StoreConfig, *,
                 topics: AbstractSet[str] | None = None) -> None:
        """`topics`: look for queues of these topics only (the writer's delay schedule reads
        one topic); None: of every topic on the volume."""
        self.directory = directory
        self.config = config
        self._only_topics = topics
        self.log = LogView(directory / COMMITLOG_DIRECTORY,
                           segment_size_bytes=config.segment_size_bytes)
        self.index = (IndexReader(directory / INDEX_DIRECTORY,
                                  hash_slot_count=config.index_hash_slot_count,
                                  index_count_max=config.index_count_max,
                                  query_results_max=config.index_query_results_max)
                      if config.index_enabled else None)
        self._queues: dict[QueueKey, QueueView] = {}
        self._topics: dict[str, list[int]] = {}
        self._reads = StoreReads(config, find_segment=self.log.find,
                                 log_range=lambda: (self.log.min_position,
                                                    self.log.committed_position),
                                 queue=lambda topic, queue_id: self._queues.get((topic, queue_id)),
                                 index=self.index)
        self._watermarks: dict[str, WatermarkFile] = {}
        self.writer_generation: int | None = None
        self.dispatched_position = 0
        """The indexer's last published `dispatched_position` (0 before any)."""
        self._cut_generation: int | None = None
        """Set after a log cut: `dispatched` vouches again once the indexer follows it."""
        self.problem: str | None = None
        """Why `positions` or `dispatched` could not be read at the last attempt, or None."""

    @classmethod
    def open(cls, directory: str | Path, config: StoreConfig | None = None, *,
             topics: AbstractSet[str] | None = None) -> StoreView:
        """A view of `directory` (which may not hold anything yet), refreshed once."""
        view = cls(Path(directory), config or embedded_config(Path(directory)), topics=topics)
        try:
            view.refresh()
        except BaseException:
            view.close()
            raise
        return view

    # -- learning what is readable -----------------------------------------------------------
    def advance(self, notices: Mapping[QueueKey, int]) -> dict[QueueKey, int]:
        """Queues advanced to the given next offsets (an indexer notice); returns the queues
        whose max offset rose, with their new max offset."""
        self._read_positions()
        advanced: dict[QueueKey, int] = {}
        for (topic, queue_id), next_offset in notices.items():
            queue = self._queue(topic, queue_id)
            if queue.vouch(next_offset):
                queue.settle_min(log_min_position=self.log.min_position)
                advanced[topic, queue_id] = queue.max_offset
        return advanced

    def apply_snapshot(self, queues: Iterable[tuple[str, int, int, int]]
                       ) -> dict[QueueKey, int]:
        """The indexer's (topic, queue id, min offset, max offset) of every queue, sent first
        on each (re)connect: the truth, so a max offset may also move down."""
        self._read_positions()
        advanced: dict[QueueKey, int] = {}
        for topic, queue_id, min_offset, max_offset in queues:
            queue = self._queue(topic, queue_id)
            if max_offset < queue.max_offset:
                log.warning("%s/%d: the indexer's snapshot ends at %d, below %d read here",
                            topic, queue_id, max_offset, queue.max_offset)
                queue.lower(max_offset)
            elif queue.vouch(max_offset):
                advanced[topic, queue_id] = queue.max_offset
            queue.settle_min(log_min_position=self.log.min_position, min_offset=min_offset)
        return advanced

    def refresh(self, *, vouch_from_dispatched: bool = True) -> dict[QueueKey, int]:
        """Re-read `dispatched` and `positions`; drop files retention deleted; find new
        queues; and (if asked) raise max offsets to what `dispatched` vouches for.  Returns
        the queues whose max offset rose."""
        dispatched = self._read_watermark(DispatchedFile, DISPATCHED_FILE)  # before positions
        log_min_position = self.log.min_position
        self._read_positions()
        moved = self.log.min_position != log_min_position
        for queue in self._queues.values():
            # The indexer deletes files after the log's start moved, maybe after this pass:
            # look every time (one stat per queue of several files), or deleted files would
            # stay mapped, their space not freed, until the start moves again.
            if queue.forget_deleted() or moved:
                queue.settle_min(log_min_position=self.log.min_position)
        self._discover_queues()
        if dispatched is None:
            return {}
        self.dispatched_position = dispatched["dispatched_position"]
        if self._cut_generation is not None:
            if dispatched["writer_generation"] != self._cut_generation:
                return {}  # the indexer has not cut its queues yet
            self._cut_generation = None
        if not vouch_from_dispatched:
            return {}
        advanced: dict[QueueKey, int] = {}
        bound = min(self.dispatched_position, self.log.committed_position)
        for key, queue in list(self._queues.items()):
            offset = queue.dispatched_offset(bound, record_matches=self._matcher(key[1]))
            if queue.vouch(offset):
                queue.settle_min(log_min_position=self.log.min_position)
                advanced[key] = queue.max_offset
        return advanced

    # -- reads (as MessageStore's: store_reads.py) -------------------------------------------
    def get(self, topic: str, queue_id: int, offset: int, max_messages: int, *,
            tags: TagFilter = None, records_only: bool = False,
            property_filter: PropertyFilter | None = None) -> GetResult:
        """`MessageStore.get`: release the result (or use `with`) when done."""
        return self._reads.get(topic, queue_id, offset, max_messages, tags=tags,
                               records_only=records_only, property_filter=property_filter)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self._reads.min_offset(topic, queue_id)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The next offset of the queue (exclusive), as vouched for so far."""
        return self._reads.max_offset(topic, queue_id)

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """`MessageStore.offset_by_time`: the first offset stored at or after the time."""
        return self._reads.offset_by_time(topic, queue_id, timestamp_ms)

    def message_at(self, physical_offset: int) -> StoredMessage:
        """The message at `physical_offset`, below the committed end; `NoRecordError` if
        there is none (gone, not yet committed, or not a message's start).

        Bytes that decode as a record are not proof of a message: a message's body may carry
        a whole record of another topic.  The consume queue is: the message is served only
        if the entry at its queue offset points at exactly `physical_offset`.
        `NotDispatchedError` if its queue has no such entry yet (it may be a message the
        indexer has yet to dispatch, or bytes inside a body)."""
        if physical_offset >= self.log.committed_position:
            self._read_positions()  # a message just written: the end may have moved
        message = self._reads.message_at(physical_offset)
        queue = self._queues.get((message.topic, message.queue_id))
        if queue is None or message.queue_offset >= queue.max_offset:
            raise NotDispatchedError(
                f"no consume queue entry for {message.topic}/{message.queue_id} offset "
                f"{message.queue_offset} yet: position {physical_offset} is not served "
                f"until the indexer dispatches a message there")
        pointed = queue.physical_offset_at(message.queue_offset)
        if pointed != physical_offset:
            raise NoRecordError(
                f"position {physical_offset} is not a message's start: entry "
                f"{message.queue_offset} of {message.topic}/{message.queue_id} points at "
                f"{'nothing readable' if pointed is None else pointed}")
        return message

    def query_by_key(self, topic: str, key: str, begin_ms: int = 0, end_ms: int | None = None,
                     max_messages: int = 32) -> list[StoredMessage]:
        """`MessageStore.query_by_key`: exact, oldest first."""
        self._read_positions()
        return self._reads.query_by_key(topic, key, begin_ms, end_ms, max_messages)

    def query_by_tag(self, topic: str, tag: str, begin_ms: int = 0, end_ms: int | None = None,
                     max_messages: int = 32) -> list[StoredMessage]:
        """`MessageStore.query_by_tag`: exact, oldest first."""
        self._read_positions()
        return self._reads.query_by_tag(topic, tag, begin_ms, end_ms, max_messages)

    def iter_messages(self, start_position: int | None = None) -> Iterator[StoredMessage]:
        """Every message from `start_position` to the committed end, in physical order."""
        self._read_positions()
        return self._reads.iter_messages(start_position)

    @property
    def damaged_reads_total(self) -> int:
        """Reads that met a damaged record (store_reads.py)."""
        return self._reads.damaged_reads_total

    def queues(self) -> list[QueueInfo]:
        """Every known queue with its offsets, by topic then queue id."""
        return [QueueInfo(topic, queue_id, queue.min_offset, queue.max_offset)
                for (topic, queue_id), queue in sorted(self._queues.items())]

    def topics(self) -> AbstractSet[str]:
        """The topics the volume holds queues of, known so far (a live view: membership is
        one lookup, whatever the number of topics)."""
        return self._topics.keys()

    def queue_ids(self, topic: str) -> list[int]:
        """The queue ids of `topic` known so far, ascending."""
        return list(self._topics.get(topic, ()))

    # -- internals -----------------------------------------------------------------------------
    def _queue(self, topic: str, queue_id: int) -> QueueView:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            directory = self.directory / CONSUME_QUEUE_DIRECTORY / topic / str(queue_id)
            queue = QueueView(directory, topic=topic, queue_id=queue_id,
                              file_size_bytes=self.config.consume_queue_file_size_bytes)
            self._queues[topic, queue_id] = queue
            self._topics[topic] = sorted([*self._topics.get(topic, ()), queue_id])
        return queue

    def _discover_queues(self) -> None:
        root = self.directory / CONSUME_QUEUE_DIRECTORY
        if not root.is_dir():
            return
        topic_directories = root.iterdir() if self._only_topics is None else (
            root / topic for topic in sorted(self._only_topics))
        for topic_directory in topic_directories:
            if not topic_directory.is_dir():
                continue
            for queue_directory in topic_directory.iterdir():
                if queue_directory.name.isdigit() and queue_directory.name.isascii():
                    self._queue(topic_directory.name, int(queue_directory.name))

    def _matcher(self, queue_id: int) -> RecordMatches:
        def matches(physical_offset: int, size_bytes: int, queue_offset: int) -> bool:
            segment = self.log.find(physical_offset)
            if segment is None or not segment.hold():
                return False
            try:
                return record.holds_entry(
                    segment.mapping, physical_offset - segment.start_position,
                    limit=segment.read_position, physical_offset=physical_offset,
                    size_bytes=size_bytes, queue_id=queue_id, queue_offset=queue_offset)
            finally:
                segment.release()

        return matches

    def _read_positions(self) -> None:
        published = self._read_watermark(PositionsFile, POSITIONS_FILE)
        if published is None:
            return
        generation = published["generation"]
        recovered_end = published["recovered_end_position"]
        if (self.writer_generation is not None and generation != self.writer_generation
                and recovered_end < self.log.committed_position):
            log.warning("writer generation %d recovered the log to %d, below %d read here: "
                        "forgetting every consume queue until the indexer has cut them",
                        generation, recovered_end, self.log.committed_position)
            self.log.cut_to(recovered_end)
            self._close_queues()
            self._cut_generation = generation
        self.writer_generation = generation
        self.log.update(min_position=published["min_position"],
                        committed_position=published["committed_position"])

    def _read_watermark(self, kind: type[WatermarkFile], name: str) -> dict[str, int] | None:
        try:
            watermark = self._watermarks.get(name)
            if watermark is None:
                watermark = self._watermarks[name] = kind(self.directory / name, writable=False)
            found = watermark.read()
        except FileNotFoundError:
            return None  # that process has not published yet
        except StoreFormatError as error:
            if self.problem is None:
                log.error("cannot read %s: %s", name, error)
            self.problem = f"{name}: {error}"
            return None
        self.problem = None
        return found[1] if found is not None else None

    def _close_queues(self) -> None:
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()
        self._topics.clear()

    def close(self) -> None:
        self._close_queues()
        self.log.close()
        if self.index is not None:
            self.index.close()
        for watermark in self._watermarks.values():
            watermark.close()
        self._watermarks.clear()

    def __enter__(self) -> StoreView:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
