"""`TimerSchedule`: the writer holds timer messages in RocketMQ 5's wheel and puts each back
into its topic when it is due.

RocketMQ's `TimerMessageStore` pipeline, on the writer's event loop (a master's only: a
follower's log is its master's).  Each pass, every `timer_pass_interval_ms` and at each slot
boundary (`timer_precision_ms`), with write time = now floored to the precision:

* enqueue: the `rmq_sys_wheel_timer`/0 entries (written by timer_puts.py, dispatched by the
  indexer) from the enqueue offset, at most `timer_enqueues_per_pass_max`.  An entry whose
  `TIMER_OUT_MS` is before the write time is due: put back at once.  Else a 52-byte unit goes
  to the timerlog, chained into the slot of its time (storage/timer/); one due further than
  `timer_roll_window_slots` ahead is parked at the window's end (ROLL) and put back into the
  timer topic then, to be enqueued again;
* dequeue: from the read time, each slot that has begun, its units in the order they are
  due (timer_due.py: the time asked, within the slot), at most
  `timer_deliveries_per_pass_max`; an ended slot whole, the one under way as far as now (a
  late enqueue into it goes out, or waits, from the enqueue).  A record is put into
  `REAL_TOPIC`/`REAL_QID` (a rolled one into the timer topic) with `TIMER_ENQUEUE_MS` and
  `TIMER_DEQUEUE_MS` added and every property kept (`TIMER_OUT_MS` stops the put from timing
  it again).  A put the store refuses for now (busy, disk full) stops the pass at that unit;
  a record that cannot be put at all is skipped, logged.  The next pass runs at the soonest
  due time too, so a message comes a few milliseconds after the time asked (RocketMQ: up to
  one precision after, at its slot's end).

Durability and no duplicate (timer_recovery.py reads it back): every
`timer_flush_interval_ms` the timerlog and the wheel are synced and the progress (read time,
enqueue offset, timerlog end) is captured with the commit log's end; config/timercheck gets
it once the commit log is flushed that far, so the checkpoint never counts a delivery whose
copy a power loss could take back.  With it goes the commit log position from which copies
delivered after the capture lie (`delivery_scan_position`: the start of a slot cut short);
after a crash, recovery counts the copies from there on by identity and the dequeue skips
that many units of each identity: what was delivered before the crash is not delivered again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.produce import ProduceCore
from mqstore.services.writer.timer_due import due_ms, in_due_order, unit_due_ms
from mqstore.services.writer.timer_puts import (
    PROPERTY_DEQUEUE_MS,
    PROPERTY_ENQUEUE_MS,
    PROPERTY_OUT_MS,
    PROPERTY_ROLL_TIMES,
    TIMER_QUEUE_ID,
    TIMER_TOPIC,
)
from mqstore.services.writer.timer_recovery import Identity, identity, recover
from mqstore.storage import ConfigError, Message, MessageStore, PutStatus, StoreError
from mqstore.storage.format.delay_levels import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from mqstore.storage.format.java_hash import java_string_hash
from mqstore.storage.format.message import StoredMessage
from mqstore.storage.format.properties import encode_properties
from mqstore.storage.reads.get import GetStatus
from mqstore.storage.reads.store_view import StoreView
from mqstore.storage.timer.timer_checkpoint import TimerCheckpoint, TimerProgress
from mqstore.storage.timer.timer_log import MAGIC_DEFAULT, MAGIC_ROLL, TimerLog, TimerUnit
from mqstore.storage.timer.timer_wheel import TimerWheel

log = logging.getLogger("mqstore.writer.timers")

HOST_FAMILY_BITS = 0x30
TRANSACTION_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
NEVER_ENQUEUED_MS = (1 << 63) - 1
"""RocketMQ's `TIMER_ENQUEUE_MS` of a message put back without entering the wheel."""
ERROR_BACKOFF_S = 10.0
RETRY_LATER = frozenset({PutStatus.OS_PAGECACHE_BUSY, PutStatus.SERVICE_NOT_AVAILABLE,
                         PutStatus.CREATE_MAPPED_FILE_FAILED})
GET_BATCH_MAX = 1000


class TimerSchedule:
    def __init__(self, core: ProduceCore, store: MessageStore, settings: WriterSettings, *,
                 now_ms: int | None = None) -> None:
        self._core = core
        self.store = store
        self.precision_ms = precision = settings.timer_precision_ms
        self._roll_window_ms = settings.timer_roll_window_slots * precision
        self._pass_interval_s = settings.timer_pass_interval_ms / 1000
        self._flush_interval_s = settings.timer_flush_interval_ms / 1000
        self._enqueues_per_pass_max = settings.timer_enqueues_per_pass_max
        self._deliveries_per_pass_max = settings.timer_deliveries_per_pass_max
        self._checkpoint = TimerCheckpoint(store.directory)
        progress = self._checkpoint.read()
        if progress.precision_ms not in (0, precision):
            raise ConfigError(f"timer_precision_ms={precision}, but the timer store was "
                              f"written with {progress.precision_ms} ({self._checkpoint.path})")
        self.wheel = TimerWheel.open(store.directory, precision_ms=precision)
        self.log = TimerLog.open(store.directory,
                                 file_size_bytes=settings.timer_log_file_size_bytes)
        recovered = recover(store, self.wheel, self.log, progress,
                            now_ms=_now_ms() if now_ms is None else now_ms)
        self.queue_offset = recovered.queue_offset
        """The next `rmq_sys_wheel_timer`/0 offset to enqueue."""
        self.read_time_ms = recovered.read_time_ms
        """Every slot before it is delivered."""
        self._delivered_before: collections.Counter[Identity] = recovered.delivered
        self._slot_positions: list[int] | None = None
        """The units of the slot at the read time, in the order they are due, once the slot
        has begun (timer_due.py)."""
        self._slot_due_ms: list[int] = []
        """When each of them is due."""
        self.next_due_ms: int | None = None
        """The soonest due time the last pass stopped at."""
        self._slot_done = 0
        self._slot_start_position = -1
        """The commit log's end when the slot at the read time began to be delivered."""
        self._captured: list[tuple[int, TimerProgress]] = []
        """(commit log end, progress) captured, oldest first, waiting for the log's flush."""
        self._counter = progress.counter
        self._view = StoreView.open(store.directory, store.config,
                                    topics=frozenset({TIMER_TOPIC}))
        self._task: asyncio.Task[None] | None = None
        self._final: TimerProgress | None = None
        """The progress at `stop()`, written after a clean close."""
        self.enqueued_total = 0
        self.delivered_total = 0
        self.skipped_total = 0
        self.duplicates_skipped_total = 0

    @classmethod
    def started(cls, core: ProduceCore, store: MessageStore, settings: WriterSettings, *,
                follower: bool) -> TimerSchedule | None:
        """A master's schedule (`timer_enabled`), started on the running loop; None on a
        follower, whose log is its master's."""
        if follower or not settings.timer_enabled:
            return None
        timers = cls(core, store, settings)
        timers.start()
        return timers

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="timer-schedule")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.checkpoint()
        self._final = self._capture()

    def persist_after_close(self, *, clean: bool) -> None:
        """After the store closed: a clean close flushed every delivered copy."""
        if clean and self._final is not None:
            self._checkpoint.write(self._final)
        self._view.close()
        self.wheel.close()
        self.log.close()

    def pending(self) -> int:
        """Messages in the wheel not yet delivered, and entries not yet enqueued (a scan of
        the slots ahead: for tests and tools, not for a hot path)."""
        self._view.refresh()
        waiting = max(0, self._view.max_offset(TIMER_TOPIC, TIMER_QUEUE_ID) - self.queue_offset)
        return waiting + self.wheel.count_from(self.read_time_ms) - self._slot_done

    async def _run(self) -> None:
        flushed_at = time.monotonic()
        while True:
            try:
                await self.run_pass()
            except Exception:  # a pass must never end the schedule
                log.exception("timer pass failed; next in %.0f s", ERROR_BACKOFF_S)
                await asyncio.sleep(ERROR_BACKOFF_S)
            if time.monotonic() - flushed_at >= self._flush_interval_s:
                flushed_at = time.monotonic()
                self.checkpoint()
            now_ms = _now_ms()
            to_boundary_s = (self.precision_ms - now_ms % self.precision_ms + 1) / 1000
            to_due_s = max(0, self.next_due_ms - now_ms) / 1000 \
                if self.next_due_ms is not None else to_boundary_s
            await asyncio.sleep(min(self._pass_interval_s, to_boundary_s, to_due_s))

    async def run_pass(self, *, now_ms: int | None = None) -> tuple[int, int]:
        """One enqueue and one dequeue; (entries enqueued, messages delivered)."""
        now = _now_ms() if now_ms is None else now_ms
        write_time_ms = max(now // self.precision_ms * self.precision_ms, self.read_time_ms)
        self._view.refresh()
        self.next_due_ms = None
        enqueued = await self._enqueue(write_time_ms, now)
        delivered = await self._dequeue(now)
        return enqueued, delivered

    # -- enqueue ---------------------------------------------------------------------------
    async def _enqueue(self, write_time_ms: int, now_ms: int) -> int:
        view, budget, done = self._view, self._enqueues_per_pass_max, 0
        while done < budget:
            offset = max(self.queue_offset, view.min_offset(TIMER_TOPIC, TIMER_QUEUE_ID))
            if offset >= view.max_offset(TIMER_TOPIC, TIMER_QUEUE_ID):
                return done
            count = min(budget - done, GET_BATCH_MAX)
            with view.get(TIMER_TOPIC, TIMER_QUEUE_ID, offset, count) as result:
                if result.status is not GetStatus.FOUND:
                    if result.next_offset <= offset:
                        return done
                    self.queue_offset = result.next_offset  # removed or damaged entries
                    continue
                for message in result.messages:
                    if not await self._enqueue_one(message, write_time_ms, now_ms):
                        return done
                    self.queue_offset = message.queue_offset + 1
                    done += 1
            if not result.messages:
                return done
        return done

    async def _enqueue_one(self, message: StoredMessage, write_time_ms: int,
                           now_ms: int) -> bool:
        """Into the wheel, or put back at once if due; False: the store refused for now."""
        try:
            out_ms = int(message.properties.get(PROPERTY_OUT_MS, ""))
        except ValueError:
            self._skip(message, f"{PROPERTY_OUT_MS}={message.properties.get(PROPERTY_OUT_MS)!r}")
            return True
        slot_time_ms = out_ms // self.precision_ms * self.precision_ms
        # The slot under way was taken already: one for it goes out now, or waits here.
        in_open_slot = self._slot_positions is not None and slot_time_ms == self.read_time_ms
        if in_open_slot:
            asked_ms = due_ms(message, slot_time_ms=slot_time_ms, precision_ms=self.precision_ms)
            if asked_ms > now_ms:
                self._note_due(asked_ms)
                return False
        if out_ms < write_time_ms or in_open_slot:
            status = await self._deliver(message, enqueue_ms=NEVER_ENQUEUED_MS, rolled=False,
                                         now_ms=now_ms)
            return status not in RETRY_LATER
        magic = MAGIC_DEFAULT
        ahead_ms = slot_time_ms - write_time_ms
        if ahead_ms >= self._roll_window_ms:
            magic |= MAGIC_ROLL
            slot_time_ms = write_time_ms + (
                self._roll_window_ms // 2 if ahead_ms - self._roll_window_ms <
                self._roll_window_ms // 3 else self._roll_window_ms)
            slot_time_ms -= slot_time_ms % self.precision_ms
        real_topic = message.properties.get(PROPERTY_REAL_TOPIC)
        unit = TimerUnit(self.wheel.last_position(slot_time_ms), magic, write_time_ms,
                         slot_time_ms - write_time_ms, message.physical_offset,
                         message.total_size, java_string_hash(real_topic) if real_topic else 0)
        self.wheel.add(slot_time_ms, self.log.append(unit))
        self.enqueued_total += 1
        return True

    # -- dequeue ---------------------------------------------------------------------------
    async def _dequeue(self, now_ms: int) -> int:
        """Deliver what is due: every unit of the slots that ended, and those of the slot
        under way whose time has come (timer_due.py)."""
        budget, delivered = self._deliveries_per_pass_max, 0
        while self.read_time_ms <= now_ms:
            ended = self.read_time_ms + self.precision_ms <= now_ms
            if self._slot_positions is None:
                self._open_slot()
            positions, dues = self._slot_positions, self._slot_due_ms
            assert positions is not None
            while self._slot_done < len(positions):
                if not ended and dues[self._slot_done] > now_ms:
                    self._note_due(dues[self._slot_done])
                    return delivered
                if delivered >= budget:
                    return delivered
                unit = self.log.unit(positions[self._slot_done])
                status = await self._deliver_unit(unit, now_ms)
                if status in RETRY_LATER:
                    return delivered
                self._slot_done += 1
                delivered += 1
            if not ended:  # open until it ends: a late enqueue into it waits (_enqueue_one)
                return delivered
            self.read_time_ms += self.precision_ms
            self._slot_positions, self._slot_done, self._slot_start_position = None, 0, -1
        return delivered

    def _open_slot(self) -> None:
        """Take the units of the slot at the read time, in the order they are due."""
        self._slot_positions, self._slot_due_ms = in_due_order(
            self._chain(self.read_time_ms), lambda at: unit_due_ms(
                self.log.unit(at), self.store.message_at, slot_time_ms=self.read_time_ms,
                precision_ms=self.precision_ms),
            slot_end_ms=self.read_time_ms + self.precision_ms)
        self._slot_start_position = self.store.written_position

    def _note_due(self, time_ms: int) -> None:
        """The soonest time a message not yet delivered is due: the next pass runs then."""
        if self.next_due_ms is None or time_ms < self.next_due_ms:
            self.next_due_ms = time_ms

    def _chain(self, time_ms: int) -> list[int]:
        """The positions of the slot's units, oldest first."""
        slot = self.wheel.slot(time_ms)
        if slot is None:
            return []
        positions: list[int] = []
        position = slot.last_position
        while position >= 0 and len(positions) < slot.unit_count:
            if position >= self.log.end_position:
                log.error("slot %d names timerlog position %d past the log's end %d; "
                          "the slot's older units are lost", time_ms, position,
                          self.log.end_position)
                break
            positions.append(position)
            assert position >= slot.first_position
            previous = self.log.unit(position).prev_position
            assert previous < position, "a slot's chain runs back through the log"
            position = previous
        positions.reverse()
        return positions

    async def _deliver_unit(self, unit: TimerUnit, now_ms: int) -> PutStatus | None:
        try:
            stored = self.store.message_at(unit.commitlog_position)
        except StoreError as error:
            log.error("timer unit's record at %d is unreadable (%s); skipped",
                      unit.commitlog_position, error)
            self.skipped_total += 1
            return None
        return await self._deliver(stored, enqueue_ms=unit.write_time_ms, rolled=unit.rolled,
                                   now_ms=now_ms)

    async def _deliver(self, stored: StoredMessage, *, enqueue_ms: int, rolled: bool,
                       now_ms: int) -> PutStatus | None:
        """Put `stored` back (into the timer topic if `rolled`); its status, None: skipped."""
        properties = dict(stored.properties)
        properties[PROPERTY_ENQUEUE_MS] = str(enqueue_ms)
        properties[PROPERTY_DEQUEUE_MS] = str(now_ms)
        if rolled:
            topic, queue_id = TIMER_TOPIC, TIMER_QUEUE_ID
            properties[PROPERTY_ROLL_TIMES] = str(
                int(properties.get(PROPERTY_ROLL_TIMES, "0") or 0) + 1)
        else:
            topic = properties.get(PROPERTY_REAL_TOPIC, "")
            real_queue = properties.get(PROPERTY_REAL_QUEUE_ID, "")
            if not topic or topic == TRANSACTION_HALF_TOPIC or not real_queue.isdigit():
                self._skip(stored, f"REAL_TOPIC={topic!r} REAL_QID={real_queue!r}")
                return None
            queue_id = int(real_queue)
        copy = identity(topic, queue_id, stored.born_timestamp_ms, properties)
        if self._delivered_before[copy] > 0:  # delivered before a crash (timer_recovery.py)
            self._delivered_before[copy] -= 1
            self.duplicates_skipped_total += 1
            return PutStatus.PUT_OK
        message = Message(topic, queue_id, bytes(stored.body), flag=stored.flag,
                          born_host=stored.born_host, born_timestamp_ms=stored.born_timestamp_ms,
                          sysflag=stored.sysflag & ~HOST_FAMILY_BITS,
                          reconsume_times=stored.reconsume_times,
                          properties_encoded=encode_properties(properties))
        (result,) = await self._core.put([message])
        if result.status in RETRY_LATER:
            return result.status
        if result.physical_offset < 0:
            self._skip(stored, f"{result.status.value}: {result.reason}")
            return None
        self.delivered_total += 1
        return result.status

    def _skip(self, stored: StoredMessage, why: str) -> None:
        log.error("timer message at commit log position %d cannot be delivered (%s); skipped",
                  stored.physical_offset, why)
        self.skipped_total += 1

    # -- checkpoint ------------------------------------------------------------------------
    def checkpoint(self) -> None:
        """Sync the timerlog and the wheel, capture the progress with the commit log's end,
        and write config/timercheck as far as the commit log is flushed."""
        captured = self._capture()
        self.log.flush()
        self.wheel.flush()
        self._captured.append((self.store.written_position, captured))
        self._write_durable(flushed_position=self.store.flushed_position)

    def _capture(self) -> TimerProgress:
        scan = self._slot_start_position if self._slot_positions is not None \
            else self.store.written_position
        self._counter += 1
        return TimerProgress(self.read_time_ms, self.log.end_position, self.queue_offset,
                             self.queue_offset, 0, _now_ms(), self._counter, self.precision_ms,
                             scan)

    def _write_durable(self, *, flushed_position: int) -> None:
        durable = None
        while self._captured and self._captured[0][0] <= flushed_position:
            durable = self._captured.pop(0)[1]
        if durable is not None:
            self._checkpoint.write(durable)


def _now_ms() -> int:
    return int(time.time() * 1000)
