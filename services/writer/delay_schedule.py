"""`DelaySchedule`: the writer puts each delayed message back into its topic when it is due.

RocketMQ's `ScheduleMessageService`, on the writer's event loop (a master's only: a
follower's log is its master's).  Every `delay_pass_interval_ms` a pass walks each level's
queue of `SCHEDULE_TOPIC_XXXX` (queue level - 1, written by delayed_puts.py and dispatched by
the indexer) from the level's offset, in queue order:

* an entry is due at its record's store time + its level's delay (what the indexer wrote as
  the entry's tags code); a due time further ahead than now + the level's delay is taken as
  now (the clock went back);
* the level stops at the first entry not yet due: entries of one level fall due in queue
  order;
* a due message is put into `REAL_TOPIC` / `REAL_QID` with its body, flags, born host and
  time, reconsume times and properties as stored (`DELAY`, `REAL_*` kept, as RocketMQ keeps
  them), not scheduled again (only produces go through `ProduceCore.delayed`);
* a put the store refuses for now (busy, disk full) stops the level until the next pass, at
  the same entry; a message that cannot be put at all (no `REAL_TOPIC`, a transaction half
  message, a topic or queue the store refuses as illegal) is skipped and logged;
* at most `delay_deliveries_per_pass_max` messages per pass, over all levels.

Progress is `config/delayOffset.json` in RocketMQ's format (storage/files/delay_offsets_file.py:
level -> next offset), written every `delay_offsets_persist_interval_ms` when it moved, and
only as far as the delivered copies are flushed to disk, with the log position the copies
not yet saved start from.  So a crash (kill -9, or a machine that loses power) loses no
delivery and delivers nothing twice: at start the copies delivered after the saved progress
are counted from the log (delay_copies.py) and their entries stepped past.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.delay_copies import delivered_since, identity_of
from mqstore.services.writer.produce import ProduceCore
from mqstore.storage import Message, MessageStore, PutStatus
from mqstore.storage.files.delay_offsets_file import DelayOffsetsFile
from mqstore.storage.format.delay_levels import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    SCHEDULE_TOPIC,
    level_of,
)
from mqstore.storage.format.message import StoredMessage
from mqstore.storage.format.properties import encode_properties
from mqstore.storage.reads.get import GetStatus
from mqstore.storage.reads.store_view import StoreView

log = logging.getLogger("mqstore.writer.delays")

HOST_FAMILY_BITS = 0x30
"""Sysflag bits of a record's layout (IPv6 hosts), not of the message."""
TRANSACTION_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
ERROR_BACKOFF_S = 10.0
"""RocketMQ's back-off after an unexpected error in a pass."""
SCAN_REWRITE_BYTES = 64 << 20
"""The progress file is written again when only its scan position moved this far: what a
restart reads of the log at most beyond the unsaved deliveries."""
RETRY_LATER = frozenset({PutStatus.OS_PAGECACHE_BUSY, PutStatus.SERVICE_NOT_AVAILABLE,
                         PutStatus.CREATE_MAPPED_FILE_FAILED})


class DelaySchedule:
    def __init__(self, core: ProduceCore, store: MessageStore, settings: WriterSettings) -> None:
        self._core = core
        self.store = store
        self._levels = core.delay_levels
        self._pass_interval_s = settings.delay_pass_interval_ms / 1000
        self._deliveries_per_pass_max = settings.delay_deliveries_per_pass_max
        self._persist_interval_s = settings.delay_offsets_persist_interval_ms / 1000
        self._file = DelayOffsetsFile(store.directory)
        self.offsets: dict[int, int] = self._file.read()
        """Level -> the next schedule queue offset to deliver."""
        self._persisted = dict(self.offsets)
        self._scan_position = self._file.scan_position
        self._copies = delivered_since(store, self._scan_position)
        """Copies delivered after the saved progress (delay_copies.py), not to put again."""
        self._unflushed: list[tuple[int, int, int, int]] = []
        """(start and end position of a delivered copy, level, next offset), oldest first."""
        self._view = StoreView.open(store.directory, store.config,
                                    topics=frozenset({SCHEDULE_TOPIC}))
        self._task: asyncio.Task[None] | None = None
        self.delivered_total = 0
        self.skipped_total = 0
        self.recognised_total = 0
        """Entries whose copy a crash left delivered: stepped past, not put again."""

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="delay-schedule")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.persist()

    def persist_after_close(self, *, clean: bool) -> None:
        """After the store closed: a clean close flushed every delivered copy."""
        if clean:
            self._unflushed.clear()
            self._persist(self.offsets, self.store.written_position)
        self._view.close()

    def pending(self) -> dict[int, int]:
        """Level -> messages waiting (queue end - next offset), for the levels holding any."""
        counts = {}
        for queue_id in self._view.queue_ids(SCHEDULE_TOPIC):
            level = queue_id + 1
            waiting = self._view.max_offset(SCHEDULE_TOPIC, queue_id) - max(
                self.offsets.get(level, 0), self._view.min_offset(SCHEDULE_TOPIC, queue_id))
            if waiting > 0:
                counts[level] = waiting
        return counts

    async def _run(self) -> None:
        persisted_at = time.monotonic()
        while True:
            try:
                await self.deliver_due()
            except Exception:  # a pass must never end the schedule
                log.exception("delay schedule pass failed; next in %.0f s", ERROR_BACKOFF_S)
                await asyncio.sleep(ERROR_BACKOFF_S)
            if time.monotonic() - persisted_at >= self._persist_interval_s:
                persisted_at = time.monotonic()
                self.persist()
            await asyncio.sleep(self._pass_interval_s)

    async def deliver_due(self, *, now_ms: int | None = None) -> int:
        """One pass over every level; returns the messages delivered."""
        self._view.refresh()
        budget = self._deliveries_per_pass_max
        for level in range(1, self._levels.max_level + 1):
            if budget <= 0:
                break
            budget -= await self._deliver_level(level, budget, now_ms)
        return self._deliveries_per_pass_max - budget

    async def _deliver_level(self, level: int, budget: int, now_ms: int | None) -> int:
        view, queue_id = self._view, level - 1
        delivered = 0
        while delivered < budget:
            offset = max(self.offsets.get(level, 0), view.min_offset(SCHEDULE_TOPIC, queue_id))
            if offset >= view.max_offset(SCHEDULE_TOPIC, queue_id):
                return delivered
            with view.get(SCHEDULE_TOPIC, queue_id, offset, budget - delivered) as result:
                if result.status is not GetStatus.FOUND:
                    if result.next_offset <= offset:
                        return delivered
                    self.offsets[level] = result.next_offset  # removed or damaged entries
                    continue
                for message in result.messages:
                    now = int(time.time() * 1000) if now_ms is None else now_ms
                    if self._due_ms(message, level, now) > now:
                        return delivered
                    status = await self._deliver(message, level)
                    if status in RETRY_LATER:
                        return delivered
                    delivered += 1
            if not result.messages:
                return delivered
        return delivered

    def _due_ms(self, message: StoredMessage, level: int, now_ms: int) -> int:
        due = self._levels.due_ms(message.store_timestamp_ms, level_of(message.properties))
        delay = self._levels.delay_ms(level) or 0
        return now_ms if due > now_ms + delay else due

    async def _deliver(self, stored: StoredMessage, level: int) -> PutStatus | None:
        """Put `stored` back into its own topic; its status (None: skipped, not put)."""
        next_offset = stored.queue_offset + 1
        topic = stored.properties.get(PROPERTY_REAL_TOPIC)
        queue_id = stored.properties.get(PROPERTY_REAL_QUEUE_ID, "")
        if not topic or topic == TRANSACTION_HALF_TOPIC or not queue_id.isdigit():
            self._skip(stored, level, f"REAL_TOPIC={topic!r} REAL_QID={queue_id!r}")
            return None
        identity = identity_of(stored, topic, int(queue_id))
        if self._copies[identity] > 0:  # delivered before a crash lost the progress
            self._copies[identity] -= 1
            self.offsets[level] = next_offset
            self.recognised_total += 1
            return PutStatus.PUT_OK
        message = Message(topic, int(queue_id), bytes(stored.body), flag=stored.flag,
                          born_host=stored.born_host,
                          born_timestamp_ms=stored.born_timestamp_ms,
                          sysflag=stored.sysflag & ~HOST_FAMILY_BITS,
                          reconsume_times=stored.reconsume_times,
                          properties_encoded=encode_properties(stored.properties) or None)
        (result,) = await self._core.put([message])
        if result.status in RETRY_LATER:
            return result.status
        if result.physical_offset < 0:
            self._skip(stored, level, f"{result.status.value}: {result.reason}")
            return None
        self.offsets[level] = next_offset
        self._unflushed.append((result.physical_offset, result.end_position, level,
                                next_offset))
        self.delivered_total += 1
        return result.status

    def _skip(self, stored: StoredMessage, level: int, why: str) -> None:
        log.error("delay level %d: the message at %s/%d offset %d cannot be delivered (%s); "
                  "skipped", level, SCHEDULE_TOPIC, level - 1, stored.queue_offset, why)
        self.offsets[level] = stored.queue_offset + 1
        self.skipped_total += 1

    def persist(self) -> None:
        """Write the offsets whose delivered copies are flushed, if they moved."""
        flushed = self.store.flushed_position
        durable = dict(self._persisted)
        kept = []
        for start, end, level, next_offset in self._unflushed:
            if end <= flushed:
                durable[level] = next_offset
            else:
                kept.append((start, end, level, next_offset))
        self._unflushed = kept
        # Skips and removed entries moved offsets with no copy to wait for.
        for level, offset in self.offsets.items():
            if not any(pending[2] == level for pending in kept):
                durable[level] = offset
        # Every copy not saved yet starts at or after this (a later one after the log's end).
        scan = min(start for start, _, _, _ in kept) if kept else self.store.written_position
        self._persist(durable, scan)

    def _persist(self, offsets: dict[int, int], scan_position: int) -> None:
        """Write when the offsets moved, or the scan position moved far enough that a
        restart would otherwise read much more log than it needs to."""
        moved = scan_position - (self._scan_position or 0)
        if offsets != self._persisted or moved >= SCAN_REWRITE_BYTES:
            self._file.write(offsets, scan_position=scan_position)
            self._persisted, self._scan_position = dict(offsets), scan_position
