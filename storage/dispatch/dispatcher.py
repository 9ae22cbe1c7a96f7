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
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ..errors import StoreError
from ..files.index_put import IndexedMessage
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
    PROPERTY_TAGS,
    decode_properties,
)
from ..format.record_scan import Damage, find_record
from ..log.reader import CommitLogReader
from ..queues.consume_queue import ConsumeQueue, ConsumeQueueGapError
from ..queues.consume_queues import ConsumeQueues
from .index_keys import indexed_message
from .stalled_queue import DISK_FULL_ERRNOS, STALLED_QUEUES_MAX, StalledQueue

log = logging.getLogger(__name__)

DAMAGE_KEPT_MAX = 1024
"""Damaged ranges remembered to explain queue holes: far more than a disk holds at once."""

QueueNotices = Mapping[tuple[str, int], int]
"""(topic, queue id) → the queue's next offset after this pass."""
Listener = Callable[[QueueNotices], None]

QueueKey = tuple[str, int]


@functools.lru_cache(maxsize=4096)
def _tags_code(tags: str) -> int:
    """Tags repeat across messages: hash each distinct one once."""
    return java_string_hash(tags)


class DispatchCorruptError(StoreError):
    """A record below the committed position failed validation: dispatch stops rather than
    skip."""


class IndexBuilder(Protocol):
    def build_run(self, messages: Sequence[IndexedMessage]) -> int | None: ...


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
        """A run of whole records: each queue's messages in it are put together
        (`_put_queue_run`), then the run's index keys in log order in one call.  Queues are
        independent, and each one's entries keep their order, so the files are as the records
        put one by one would leave them.  If anything raises, dispatch goes back to the run's
        start: entries put again are duplicates, which the queues ignore and the index
        skips."""
        if not run:
            return
        start = self.dispatched_position
        try:
            queue_runs: dict[QueueKey, list[DispatchRecord]] = {}
            takes_queue_offset, queue_run, key = record.takes_queue_offset, None, None
            for whole in run:
                if whole.topic in (PADDING_TOPIC, SCHEDULE_TOPIC) or \
                        not takes_queue_offset(whole.sysflag):
                    self._put_queue_entry(whole, notices)
                    continue
                if key is None or whole.queue_id != key[1] or whole.topic != key[0]:
                    key = whole.topic, whole.queue_id
                    queue_run = queue_runs.setdefault(key, [])
                assert queue_run is not None
                queue_run.append(whole)
            for key, records in queue_runs.items():
                self._put_queue_run(key, records, notices)
            if self._index is not None:
                self._build_index_run([indexed_message(whole, index_tags=self.index_tags)
                                       for whole in run
                                       if whole.properties and whole.topic != PADDING_TOPIC])
        except BaseException:
            self.dispatched_position = start
            raise
        last = run[-1]
        self.dispatched_position = last.physical_offset + last.total_size
        self.last_store_timestamp_ms = last.store_timestamp_ms
        self.records_dispatched_total += len(run)

    def _put_queue_run(self, key: QueueKey, records: list[DispatchRecord],
                       notices: dict[tuple[str, int], int]) -> None:
        """One queue's messages of a run, in order: in one call each (`_put_streak`) as far
        as the queue takes them so, else one by one (`_put_queue_entry`)."""
        first, count = 0, len(records)
        while first < count:
            written = self._put_streak(key, records, first, notices) if count - first > 1 else 0
            if not written:
                self._put_queue_entry(records[first], notices)
            first += written or 1

    def _put_streak(self, key: QueueKey, records: list[DispatchRecord], first: int,
                    notices: dict[tuple[str, int], int]) -> int:
        """What the queue (not stalled, not left out) takes of `records[first:]` in one call
        (`ConsumeQueue.put_streak`); returns how many."""
        queue = self._queues.get(*key)
        if queue is None or self.only_queues is not None or key in self.stalled_queues:
            return 0
        tags_codes = None
        if any(whole.properties for whole in records[first:]):
            tags_codes = [_tags_code(tags) if (tags := whole.properties.get(PROPERTY_TAGS))
                          else 0 for whole in records[first:]]
        written = queue.put_streak(records, first, len(records), tags_codes)
        if written:
            notices[key] = records[first + written - 1].queue_offset + 1
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
        if head.topic == PADDING_TOPIC:
            return  # a group commit's filler (padding.py): nothing to consume or index
        self._put_queue_entry(head, notices)
        if self._index is not None and head.properties:  # no properties: no key to index
            self._build_index_run([indexed_message(head, index_tags=self.index_tags)])
        self.last_store_timestamp_ms = head.store_timestamp_ms
        self.records_dispatched_total += 1

    def _put_queue_entry(self, head: DispatchRecord,
                         notices: dict[tuple[str, int], int]) -> None:
        """One record's consume queue entry, if it takes one (not a filler, a half or an
        end), its queue is not stalled and not left out."""
        topic = head.topic
        key = (topic, head.queue_id)
        if topic == PADDING_TOPIC or not record.takes_queue_offset(head.sysflag) or \
                key in self.stalled_queues or \
                (self.only_queues is not None and key not in self.only_queues):
            return
        properties = head.properties
        try:
            tags = properties.get(PROPERTY_TAGS)
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

    def _build_index_run(self, messages: list[IndexedMessage]) -> None:
        assert self._index is not None
        messages = [message for message in messages if message[2]]
        if not messages:
            return  # `IndexService.build_run` would index nothing
        rolled = self._index.build_run(messages)
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
