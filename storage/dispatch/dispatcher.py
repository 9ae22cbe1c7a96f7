"""Dispatch (RocketMQ's reput): tail the commit log and build consume queues and the index.

One pass reads every whole record from `dispatched_position` up to the committed position it
is given, and for each:

    message (NOT/COMMIT)  → consume queue entry (topic, queue id) at its QUEUEOFFSET
                          → index: topic#UNIQ_KEY and topic#key for each KEYS entry
    group-commit filler   → nothing (topic rmq_sys_mqstore_padding, see padding.py)
    BLANK                 → jump to the next segment
    damage                → skipped to the next whole record (record_scan.py), reported
                            (ERROR log, `damage`); a queue left with a hole by it gets
                            *damaged entries* for the missing offsets: they point at the
                            damaged bytes, and a read of one answers MESSAGE_CORRUPT
    a missing segment     → DispatchCorruptError (the writer's recovery recreates those)

A queue hole with no damage seen before it (offsets the writer gave out with no record in
the log: a bug, as a writer that gave a prepared transaction record an offset was) stops
nothing either: the missing offsets get damaged entries pointing at the record that showed
the hole, so reads of them answer MESSAGE_CORRUPT and consumers go on past them; it is
logged at ERROR and counted (`queue_holes_total`).

A file-system error on one queue's files (a name the file system refuses, EIO, EACCES) stalls
that queue only: it is reported (`stalled_queues`, one ERROR log), later records of that
queue are not put, and every other queue and the index go on.  `replay_stalled` puts the
stalled queues' records again from where each stalled, on the dispatch thread, every
`stalled_queue_retry_interval_ms`; a restarted indexer does the same through its resume rule (the
queue is behind the writer's queue offsets).  A full disk (ENOSPC, EDQUOT) is not one queue's
trouble: it stalls all of dispatch (`DispatchService`, dispatch_service.py).

Duplicates are ignored by the consume queues, so re-dispatching a range is safe (abnormal
recovery does it).  After each pass the listener gets one batched notice: the next offset of
every queue that advanced.  The dispatcher reads through a `CommitLogReader` and is told the
committed position, so it works the same inside the writer's process and in a separate indexer
process that reads the position the writer publishes.
"""

from __future__ import annotations

import collections
import dataclasses
import errno
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ..errors import StoreError
from ..format import record
from ..format.delay_levels import (
    DEFAULT_DELAY_LEVELS,
    SCHEDULE_TOPIC,
    DelayLevels,
    level_of,
)
from ..format.dispatch_scan import DispatchRecord, scan_records
from ..format.java_hash import java_string_hash
from ..format.padding import PADDING_TOPIC
from ..format.properties import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQUE_KEY,
    decode_properties,
)
from ..format.record_scan import Damage, find_record
from ..log.reader import CommitLogReader
from ..queues.consume_queue import ConsumeQueue, ConsumeQueueGapError
from ..queues.consume_queues import ConsumeQueues

log = logging.getLogger(__name__)

DAMAGE_KEPT_MAX = 1024
"""Damaged ranges remembered to explain queue holes: far more than a disk holds at once."""

QueueNotices = Mapping[tuple[str, int], int]
"""(topic, queue id) → the queue's next offset after this pass."""
Listener = Callable[[QueueNotices], None]

DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
"""Errors of the whole disk, not of one queue's files: they stall all of dispatch."""
STALLED_QUEUES_MAX = 10_000
"""Stalled queues remembered; past it dispatch stops (a disk that fails every file is not
one queue's trouble)."""

QueueKey = tuple[str, int]


@dataclasses.dataclass(frozen=True)
class StalledQueue:
    """A queue whose file could not be written: from `physical_offset` (the first record it
    could not take, queue offset `queue_offset`) its records wait for `replay_stalled`."""

    topic: str
    queue_id: int
    physical_offset: int
    queue_offset: int
    reason: str


@functools.lru_cache(maxsize=4096)
def _tags_code(tags: str) -> int:
    """Tags repeat across messages: hash each distinct one once."""
    return java_string_hash(tags)


class DispatchCorruptError(StoreError):
    """A record below the committed position failed validation: dispatch stops rather than
    skip."""


class IndexBuilder(Protocol):
    def build(self, *, topic: str, keys: Sequence[str], unique_key: str | None,
              tags: str | None, physical_offset: int, store_timestamp_ms: int) -> int | None: ...


class Dispatcher:
    def __init__(self, reader: CommitLogReader, queues: ConsumeQueues, *,
                 index: IndexBuilder | None, dispatched_position: int,
                 records_per_pass_max: int, index_tags: bool = True,
                 only_queues: frozenset[QueueKey] | None = None,
                 delay_levels: DelayLevels | None = None) -> None:
        """`only_queues`: put entries into these queues only (a replay of stalled queues).
        `delay_levels`: the table schedule entries' due times are taken from (RocketMQ's
        default table when None)."""
        self._reader = reader
        self.delay_levels = delay_levels or DelayLevels.parse(DEFAULT_DELAY_LEVELS)
        self._queues = queues
        self._index = index
        self.dispatched_position = dispatched_position
        self.caught_up = True  # the last pass reached the committed position it was given
        self.records_per_pass_max = records_per_pass_max
        self.index_tags = index_tags
        """Also index each message's TAGS (`topic#T#<tags>`), as RocketMQ 5 does."""
        self.last_store_timestamp_ms = 0
        self.index_timestamp_ms: int | None = None
        """End time of the newest index file that filled and was synced (for the checkpoint)."""
        self.records_dispatched_total = 0
        self.damage: collections.deque[Damage] = collections.deque(maxlen=DAMAGE_KEPT_MAX)
        """Damaged ranges dispatch skipped (the newest DAMAGE_KEPT_MAX)."""
        self.damaged_ranges_total = 0
        self.only_queues = only_queues
        self.stalled_queues: dict[QueueKey, StalledQueue] = {}
        self.queue_holes_total = 0

    def dispatch(self, *, committed_position: int, min_position: int) -> QueueNotices:
        """Dispatch whole records in [dispatched_position, committed_position); return the
        notices."""
        # Retention may have removed what was never dispatched.
        self.dispatched_position = max(self.dispatched_position, min_position)
        notices: dict[tuple[str, int], int] = {}
        budget = self.records_per_pass_max
        while self.dispatched_position < committed_position and budget > 0:
            segment = self._reader.find(self.dispatched_position)
            if segment is None or not segment.hold():
                raise DispatchCorruptError(f"no commit log segment holds position "
                                           f"{self.dispatched_position} below the committed "
                                           f"position {committed_position}")
            try:
                start = segment.start_position
                end = min(committed_position, segment.end_position)
                budget -= self._dispatch_segment(segment.mapping, start, end, notices, budget)
            finally:
                segment.release()
        self.caught_up = self.dispatched_position >= committed_position
        return notices

    def _dispatch_segment(self, mapping: record.ReadableBuffer, start: int, end: int,
                          notices: dict[tuple[str, int], int], budget: int) -> int:
        """Runs of whole records are read at once (`scan_records`, in C); the record a run
        stops at (a BLANK, damage, the end) is checked on its own, as each used to be."""
        size = self._reader.segment_size_bytes
        dispatched = 0
        while self.dispatched_position < end and dispatched < budget:
            position = self.dispatched_position - start
            run, _ = scan_records(mapping, position, end - start, size, start,
                                  budget - dispatched)
            self._dispatch_run(run, notices)
            dispatched += len(run)
            if self.dispatched_position >= end or dispatched >= budget:
                break
            position = self.dispatched_position - start
            result = record.check_record(mapping, position, limit=size,
                                         expected_physical_offset=self.dispatched_position,
                                         verify_crc=False)
            if result.status is record.RecordCheck.BLANK:
                self.dispatched_position = start + size
                break
            if result.status is not record.RecordCheck.OK:
                self._skip_damage(mapping, start, end, reason=result.reason or
                                  "zeros where a record was due")
                continue
            self._dispatch_record(mapping, position, result, notices)
            self.dispatched_position += result.size_bytes
            dispatched += 1
        return dispatched

    def _dispatch_run(self, run: list[DispatchRecord],
                      notices: dict[tuple[str, int], int]) -> None:
        """A run of whole records, in order: a streak of one queue's plain records
        (`_streak_end`) is put in one call where its queue takes it as it is (`_put_streak`);
        every other record, and what the queue does not take so, goes to `_dispatch_fields`."""
        index, count = 0, len(run)
        while index < count:
            end = max(self._streak_end(run, index, count), index + 1)
            while index < end:
                written = self._put_streak(run, index, end, notices) if end - index > 1 else 0
                if not written:
                    self._dispatch_fields(run[index], notices)
                    self.dispatched_position += run[index].total_size
                index += written or 1

    def _streak_end(self, run: list[DispatchRecord], first: int, count: int) -> int:
        """The end of the streak of plain records from `first` (`first` if it is not one):
        one queue's messages without properties (no tags code, no index key) nor delay."""
        topic, queue_id = run[first].topic, run[first].queue_id
        if topic in (PADDING_TOPIC, SCHEDULE_TOPIC):
            return first
        end = first
        while end < count:
            whole = run[end]
            if whole.queue_id != queue_id or whole.topic != topic or whole.properties or \
                    not record.takes_queue_offset(whole.sysflag):
                break
            end += 1
        return end

    def _put_streak(self, run: list[DispatchRecord], first: int, end: int,
                    notices: dict[tuple[str, int], int]) -> int:
        """What the queue (not stalled, not left out) takes of the streak `run[first:end]` in
        one call (`ConsumeQueue.put_untagged`); returns how many records that dispatched."""
        key = run[first].topic, run[first].queue_id
        queue = self._queues.get(*key)
        if queue is None or self.only_queues is not None or key in self.stalled_queues:
            return 0
        written = queue.put_untagged(run, first, end)
        if written:
            last = run[first + written - 1]
            notices[key] = last.queue_offset + 1
            self.last_store_timestamp_ms = last.store_timestamp_ms
            self.records_dispatched_total += written
            self.dispatched_position = last.physical_offset + last.total_size
        return written

    def _skip_damage(self, mapping: record.ReadableBuffer, start: int, end: int, *,
                     reason: str) -> None:
        """A record below the committed position that is not whole: move to the next whole
        record (or the segment's end, or the committed end) and remember the damage."""
        size = self._reader.segment_size_bytes
        position = self.dispatched_position - start
        found = find_record(mapping, position + 1, end - start, limit=size,
                            segment_start=start)
        resumed = start + found if found is not None else end
        damage = Damage(self.dispatched_position, resumed, reason)
        log.error("dispatch skipped damaged bytes of the commit log at %s", damage)
        self.damage.append(damage)
        self.damaged_ranges_total += 1
        self.dispatched_position = resumed

    def _damage_between(self, after: int, before: int) -> Damage | None:
        """The first damage known that starts in [after, before] (a lost tail recovery cut
        starts where the first record written after it does)."""
        for damage in self.damage:
            if after <= damage.position <= before:
                return damage
        return None

    def note_damage(self, damage: Damage) -> None:
        """Damage found elsewhere (recovery, a cut log): it may explain a queue hole."""
        self.damage.append(damage)

    def _dispatch_record(self, mapping: record.ReadableBuffer, position: int,
                         result: record.CheckResult,
                         notices: dict[tuple[str, int], int]) -> None:
        head, layout = result.head, result.layout
        assert head is not None
        assert layout is not None
        topic_bytes, properties_bytes = record.topic_and_properties(mapping, position, layout,
                                                                    head)
        self._dispatch_fields(DispatchRecord(
            head.physical_offset, head.total_size, head.queue_id, head.queue_offset,
            head.sysflag, head.store_timestamp_ms, topic_bytes.decode("ascii", "replace"),
            decode_properties(properties_bytes)), notices)

    def _dispatch_fields(self, head: DispatchRecord,
                         notices: dict[tuple[str, int], int]) -> None:
        """One whole record's consume queue entry and index keys."""
        topic = head.topic
        if topic == PADDING_TOPIC:
            return  # a group commit's filler (padding.py): nothing to consume or index
        properties = head.properties
        tags = properties.get(PROPERTY_TAGS)
        key = (topic, head.queue_id)
        if record.takes_queue_offset(head.sysflag) and \
                key not in self.stalled_queues and \
                (self.only_queues is None or key in self.only_queues):
            try:
                tags_code = _tags_code(tags) if tags else 0
                if topic == SCHEDULE_TOPIC:  # a delayed message: the entry says when it is due
                    tags_code = self.delay_levels.due_ms(head.store_timestamp_ms,
                                                         level_of(properties))
                if self._put_entry(head, topic, tags_code):
                    notices[key] = head.queue_offset + 1
            except OSError as error:
                if error.errno in DISK_FULL_ERRNOS:
                    raise
                self._stall(StalledQueue(topic, head.queue_id, head.physical_offset,
                                         head.queue_offset, f"{type(error).__name__}: {error}"))
            except ConsumeQueueGapError as error:
                if self.only_queues is None:
                    raise
                # A replay that finds the queue's records gone (retention deleted them while
                # it was stalled): it stays stalled, and says so.
                self._stall(StalledQueue(topic, head.queue_id, head.physical_offset,
                                         head.queue_offset, str(error)))
        if self._index is not None and properties:  # no properties: no key to index
            self._build_index(head, tags)
        self.last_store_timestamp_ms = head.store_timestamp_ms
        self.records_dispatched_total += 1

    def _build_index(self, head: DispatchRecord, tags: str | None) -> None:
        assert self._index is not None
        properties = head.properties
        keys = [k for k in properties.get(PROPERTY_KEYS, "").split(KEY_SEPARATOR) if k]
        unique_key = properties.get(PROPERTY_UNIQUE_KEY)
        indexed_tags = tags if self.index_tags else None
        if not (keys or unique_key or indexed_tags):
            return  # `IndexService.build` would index nothing
        rolled = self._index.build(topic=head.topic, keys=keys, unique_key=unique_key,
                                   tags=indexed_tags, physical_offset=head.physical_offset,
                                   store_timestamp_ms=head.store_timestamp_ms)
        if rolled is not None:
            self.index_timestamp_ms = rolled

    def _put_entry(self, head: DispatchRecord, topic: str, tags_code: int) -> bool:
        """The record's consume queue entry (and damaged entries before it for a hole that
        damage explains); True if the queue took it."""
        queue = self._queues.get_or_create(topic, head.queue_id)
        if head.queue_offset > queue.max_offset:
            damage = self._damage_between(queue.max_physical_end, head.physical_offset)
            if damage is not None:
                # Sized to end before this record: a lost tail's damage overlaps the
                # records written after the cut.
                queue.mark_damaged(up_to_offset=head.queue_offset,
                                   physical_offset=damage.position,
                                   size_bytes=max(1, min(
                                       damage.end_position, head.physical_offset)
                                       - damage.position))
            elif queue.files and self.only_queues is None:
                self._fill_hole(queue, head)
        return queue.put(physical_offset=head.physical_offset, size_bytes=head.total_size,
                         tags_code=tags_code, queue_offset=head.queue_offset)

    def _fill_hole(self, queue: ConsumeQueue, head: DispatchRecord) -> None:
        """Offsets [queue end, this record's) have no record in the log and no damage
        explains them (the module docstring): damaged entries, so the queue goes on."""
        log.error("consume queue %s/%d: offsets %d..%d have no record in the log before "
                  "position %d (the writer gave them out, dispatch found none); they answer "
                  "MESSAGE_CORRUPT", queue.topic, queue.queue_id, queue.max_offset,
                  head.queue_offset - 1, head.physical_offset)
        queue.mark_damaged(up_to_offset=head.queue_offset, physical_offset=head.physical_offset,
                           size_bytes=1)
        self.queue_holes_total += 1

    def _stall(self, stalled: StalledQueue) -> None:
        if len(self.stalled_queues) >= STALLED_QUEUES_MAX:
            raise DispatchCorruptError(f"{STALLED_QUEUES_MAX} consume queues stalled; the "
                                       f"last: {stalled}")
        log.error("consume queue %s/%d stalled at queue offset %d (log position %d): %s; "
                  "the other queues go on, and its records are put again every retry",
                  stalled.topic, stalled.queue_id, stalled.queue_offset,
                  stalled.physical_offset, stalled.reason)
        self.stalled_queues[stalled.topic, stalled.queue_id] = stalled

    def replay_stalled(self, *, min_position: int) -> QueueNotices:
        """Put the stalled queues' records again, from the first each could not take (or the
        log's start, `min_position`) up to where dispatch is; a queue that takes them all is
        no longer stalled, one that fails again stays stalled.  Returns the notices of the
        queues that moved."""
        if not self.stalled_queues:
            return {}
        stalled, self.stalled_queues = self.stalled_queues, {}
        start = max(min_position, min(s.physical_offset for s in stalled.values()))
        replay = Dispatcher(self._reader, self._queues, index=None, dispatched_position=start,
                            records_per_pass_max=self.records_per_pass_max,
                            delay_levels=self.delay_levels,
                            only_queues=frozenset(stalled))
        replay.damage.extend(self.damage)
        notices: dict[QueueKey, int] = {}
        try:
            while replay.dispatched_position < self.dispatched_position:
                notices.update(replay.dispatch(committed_position=self.dispatched_position,
                                               min_position=min_position))
        except BaseException:
            self.stalled_queues = stalled
            raise
        self.stalled_queues = replay.stalled_queues
        for key in stalled.keys() - self.stalled_queues.keys():
            log.info("consume queue %s/%d resumed", *key)
        return notices
