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

A queue hole with no damage seen before it is a bug, and stops dispatch
(ConsumeQueueGapError), as a record that is not whole does.

Duplicates are ignored by the consume queues, so re-dispatching a range is safe (abnormal
recovery does it).  After each pass the listener gets one batched notice: the next offset of
every queue that advanced.  The dispatcher reads through a `CommitLogReader` and is told the
committed position, so it works the same inside the writer's process and in a separate indexer
process that reads the position the writer publishes.
"""

from __future__ import annotations

import collections
import errno
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ..config import StoreConfig
from ..errors import StoreError
from ..format import record
from ..format.java_hash import java_string_hash
from ..format.padding import PADDING_TOPIC_BYTES
from ..format.properties import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQUE_KEY,
    decode_properties,
)
from ..format.record_scan import Damage, find_record
from ..log.reader import CommitLogReader
from ..queues.consume_queues import ConsumeQueues
from ..service_thread import FatalHandler, ServiceThread

log = logging.getLogger(__name__)

DAMAGE_KEPT_MAX = 1024
"""Damaged ranges remembered to explain queue holes: far more than a disk holds at once."""

QueueNotices = Mapping[tuple[str, int], int]
"""(topic, queue id) → the queue's next offset after this pass."""
Listener = Callable[[QueueNotices], None]

_DISPATCHED_TRANSACTION_TYPES = (0, record.SysFlag.TRANSACTION_COMMIT)


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
                 records_per_pass_max: int, index_tags: bool = True) -> None:
        self._reader = reader
        self._queues = queues
        self._index = index
        self.dispatched_position = dispatched_position
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
        return notices

    def _dispatch_segment(self, mapping: record.ReadableBuffer, start: int, end: int,
                          notices: dict[tuple[str, int], int], budget: int) -> int:
        size = self._reader.segment_size_bytes
        dispatched = 0
        while self.dispatched_position < end and dispatched < budget:
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
        if topic_bytes == PADDING_TOPIC_BYTES:
            return  # a group commit's filler (padding.py): nothing to consume or index
        topic = topic_bytes.decode("ascii", "replace")
        properties = decode_properties(properties_bytes)
        tags = properties.get(PROPERTY_TAGS)
        if head.sysflag & record.TRANSACTION_TYPE_MASK in _DISPATCHED_TRANSACTION_TYPES:
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
            if queue.put(physical_offset=head.physical_offset, size_bytes=head.total_size,
                         tags_code=_tags_code(tags) if tags else 0,
                         queue_offset=head.queue_offset):
                notices[topic, head.queue_id] = head.queue_offset + 1
        if self._index is not None:
            keys = [k for k in properties.get(PROPERTY_KEYS, "").split(KEY_SEPARATOR) if k]
            rolled = self._index.build(topic=topic, keys=keys,
                                       unique_key=properties.get(PROPERTY_UNIQUE_KEY),
                                       tags=tags if self.index_tags else None,
                                       physical_offset=head.physical_offset,
                                       store_timestamp_ms=head.store_timestamp_ms)
            if rolled is not None:
                self.index_timestamp_ms = rolled
        self.last_store_timestamp_ms = head.store_timestamp_ms
        self.records_dispatched_total += 1


class DispatchService(ServiceThread):
    """Runs passes until caught up, then polls every `dispatch_interval_ms`.

    A full disk (ENOSPC, EDQUOT creating a consume queue or index file) stalls dispatch
    instead of stopping the store: it retries every `dispatch_retry_interval_ms` and says why
    in `stalled_reason` (re-dispatching is idempotent, so a half-done record is safe to
    repeat).  Anything else that fails is fatal."""

    name = "dispatch"

    def __init__(self, dispatcher: Dispatcher, config: StoreConfig, *,
                 committed_position: Callable[[], int], min_position: Callable[[], int],
                 listener: Listener | None, on_fatal: FatalHandler) -> None:
        super().__init__(on_fatal=on_fatal)
        self.dispatcher = dispatcher
        self._config = config
        self._committed_position = committed_position
        self._min_position = min_position
        self.listener = listener
        self.stalled_reason: str | None = None

    @property
    def behind_bytes(self) -> int:
        return max(0, self._committed_position() - self.dispatcher.dispatched_position)

    def run_once(self) -> None:
        before = self.dispatcher.dispatched_position
        try:
            self.dispatch_once()
        except OSError as error:
            if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            position = self.dispatcher.dispatched_position
            if self.stalled_reason is None:
                log.error("dispatch stalled at %d: %s", position, error)
            self.stalled_reason = f"dispatch stalled at {position}: {error}"
            self.wait_for_running(self._config.dispatch_retry_interval_ms)
            return
        if self.stalled_reason is not None:
            log.info("dispatch resumed at %d", self.dispatcher.dispatched_position)
            self.stalled_reason = None
        if self.dispatcher.dispatched_position == before:
            self.wait_for_running(self._config.dispatch_interval_ms)

    def dispatch_once(self) -> None:
        notices = self.dispatcher.dispatch(committed_position=self._committed_position(),
                                           min_position=self._min_position())
        if notices and self.listener is not None:
            self.listener(notices)

    def catch_up(self) -> None:
        """Dispatch until nothing readable is left (run before the thread starts)."""
        while self.behind_bytes > 0:
            self.dispatch_once()

    def shutdown_drain(self) -> None:
        self.catch_up()
