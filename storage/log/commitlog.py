"""The commit log's put path: check outside the lock, write in place under it.

    put(msg):  prepare (topic rules, sizes, CRC, cached tail)      no lock
               take the put lock (≤ put_lock_timeout_ms, else OS_PAGECACHE_BUSY)
               roll if the record does not fit: BLANK tail, next segment (+ pool buffer)
               write_record: the head with QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP
               packed straight into the mapping or the pool buffer, body and tail after it
               advance written_position, the queue's next offset
               release; wake the commit service; (sync flush: the store parks the caller)

A batch is prepared record by record, packed as it expects to land in one bytes object
(`pack_batch`), and copied with one slice assignment: one contiguous write with consecutive
queue offsets per queue.  A record never straddles two segments; every full segment ends
with a BLANK record.

This is the hottest code in the project.  `prepare`, `write_record` and `pack_batch`
(format/encoder.py, the record layout in its docstring) have C twins that also build the
`PutResult`s; the Python here keeps only the lock, the room check and the queue offsets,
inline on purpose (each avoided call is ~0.1 µs of a ~2 µs put; a test holds the written
bytes to `record.encode_record`'s)."""

from __future__ import annotations

import logging
import mmap
import threading
import time
from collections.abc import Callable, Sequence

from ..config import StoreConfig
from ..errors import (
    BufferPoolExhausted,
    MessageIllegalError,
    ReplicationGapError,
    SegmentCreateError,
)
from ..files.segment import CommitLogSegment
from ..format import record
from ..format.encoder import MessageEncoder, PreparedRecord, pack_batch, write_record
from ..format.message import Message, PutResult, PutStatus
from ..format.padding import PaddingEncoder, padding_size_bytes
from ..format.record_chunks import check_chunk
from .allocator import DiskFullError, SegmentAllocator
from .batch_guess import BatchGuess
from .pool import TransientStorePool
from .segment_list import SegmentList

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]

_OFFSETS = record.QUEUE_AND_PHYSICAL_OFFSET
_TIMESTAMP = record.TIMESTAMP
_RESERVE = record.BLANK_SIZE_BYTES
_PUT_OK = PutStatus.PUT_OK
_time_ns = time.time_ns


class _Refused(Exception):
    """Internal: the put path cannot append right now; carries the status and reason."""

    def __init__(self, status: PutStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class CommitLog:
    """Appends records to the segment list.  Thread-safe; one instance per store."""

    def __init__(self, segment_list: SegmentList, config: StoreConfig, *,
                 allocator: SegmentAllocator, pool: TransientStorePool | None,
                 queue_offsets: dict[QueueKey, int],
                 after_append: Callable[[int], None] | None) -> None:
        self._segment_list = segment_list
        self._config = config
        self._allocator = allocator
        self._pool = pool
        encoder = MessageEncoder(config)
        self._prepare = encoder.prepare
        self.store_host_packed = encoder.store_host_packed
        self.queue_offsets = queue_offsets
        """Next queue offset per (topic, queue id); only touched under the put lock."""
        self.refused_reason: str | None = None
        """Set when the store stops accepting writes (closed, failed sync): every put then
        returns SERVICE_NOT_AVAILABLE with this reason."""
        self._after_append = after_append
        """Called after each append, outside the lock, with the log's new end position (the
        pool's commit-service wakeup; the position spares it reading the segment list)."""
        self._put_lock = threading.Lock()
        self._put_lock_timeout_s = config.put_lock_timeout_ms / 1000
        self._active = segment_list.last
        self._padding = PaddingEncoder(encoder.store_host)
        self.padding_totals = (0, 0)
        """Fillers written by `seal_group` (group_commit_align_bytes): (count, bytes)."""

    # -- put -------------------------------------------------------------------------------
    def put(self, message: Message) -> PutResult:
        if self.refused_reason is not None:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=self.refused_reason)
        try:
            prepared = self._prepare(message)
        except MessageIllegalError as error:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=str(error))
        size = prepared[1]
        lock = self._put_lock
        # Uncontended, the try without a timeout is the cheaper call (no timeout to parse).
        if not (lock.acquire(False) or lock.acquire(True, self._put_lock_timeout_s)):
            return _busy(self._config)
        try:
            segment = self._active
            if segment is None or segment.size_bytes - segment.written_position < size + _RESERVE:
                segment = self._roll()
            position = segment.written_position
            sysflag = prepared[10]
            key = (message.topic, message.queue_id)
            takes_offset = sysflag == 0 or record.takes_queue_offset(sysflag)
            queue_offset = self.queue_offsets.get(key, 0) if takes_offset else 0
            store_timestamp_ms = _time_ns() // 1_000_000
            result = write_record(segment.write_target, position, prepared, queue_offset,
                                  segment.start_position + position, store_timestamp_ms,
                                  self.store_host_packed)
            segment.written_position = position + size
            if takes_offset:
                self.queue_offsets[key] = queue_offset + 1
            self._segment_list.last_store_timestamp_ms = store_timestamp_ms
        except _Refused as refused:
            return PutResult(refused.status, reason=refused.reason)
        finally:
            lock.release()
        if self._after_append is not None:
            self._after_append(result.physical_offset + size)
        return result

    def put_batch(self, messages: Sequence[Message]) -> list[PutResult]:
        """All or nothing: one illegal message refuses the whole batch (each result says
        which message was illegal and why).

        Optimistic stamping: the batch reads where it will land (the active segment's
        position and each queue's next offset) without the lock and encodes its records
        already stamped.  Under the lock it checks that guess; when no other writer came in
        between, the locked section is one copy.  Otherwise it re-stamps in place, as a
        single put does.  The store time is then read before the lock, but no record was
        appended in between, so store time still follows position.
        """
        if not messages:
            return []
        if self.refused_reason is not None:
            return _all(messages, PutStatus.SERVICE_NOT_AVAILABLE, self.refused_reason)
        guess = BatchGuess(self._active, self.queue_offsets)
        try:
            blob, results = self._encode_batch(messages, guess)
        except MessageIllegalError as error:
            return _all(messages, PutStatus.MESSAGE_ILLEGAL, str(error))
        if len(blob) > self._config.put_batch_size_bytes_max:
            return _all(messages, PutStatus.MESSAGE_ILLEGAL,
                        f"batch is {len(blob)} bytes encoded; the maximum is "
                        f"{self._config.put_batch_size_bytes_max} (put_batch_size_bytes_max)")
        lock = self._put_lock
        if not (lock.acquire(False) or lock.acquire(True, self._put_lock_timeout_s)):
            return [_busy(self._config) for _ in messages]
        try:
            if guess.holds(self._active, self.queue_offsets, len(blob)):
                self._append_as_guessed(blob, guess)
            else:
                self._append_and_restamp(messages, blob, results)
        except _Refused as refused:
            return _all(messages, refused.status, refused.reason)
        finally:
            lock.release()
        if self._after_append is not None:
            last = results[-1]
            self._after_append(last.physical_offset + last.size_bytes)
        return results

    def _encode_batch(self, messages: Sequence[Message],
                      guess: BatchGuess) -> tuple[bytes, list[PutResult]]:
        """Encode every record stamped as the guess predicts; the results carry the
        predicted offsets (corrected in place if the guess breaks).  Raises
        `MessageIllegalError` for a transaction message anywhere in the batch (that reason
        first, as if checked before any message) or else the first illegal message."""
        records: list[PreparedRecord] = []
        queue_offsets: list[int] = []
        add_record, add_offset = records.append, queue_offsets.append
        prepare = self._prepare
        next_offsets = guess.next_offsets
        topic: str | None = None
        queue_id = next_offset = sysflags = 0
        for message in messages:
            try:
                prepared = prepare(message)
            except Exception as error:
                _refuse_transactions(messages)
                if isinstance(error, MessageIllegalError):
                    raise MessageIllegalError(
                        f"message {len(records)} of the batch: {error}") from None
                raise
            sysflags |= prepared[10]
            if prepared[3] != queue_id or message.topic != topic:
                if topic is not None:
                    next_offsets[topic, queue_id] = next_offset
                topic, queue_id = message.topic, prepared[3]
                next_offset = next_offsets.get((topic, queue_id), -1)
                if next_offset < 0:
                    next_offset = guess.first_offset((topic, queue_id))
            add_record(prepared)
            add_offset(next_offset)
            next_offset += 1
        assert topic is not None
        if sysflags & record.TRANSACTION_TYPE_MASK:
            raise MessageIllegalError(_NO_TRANSACTIONS)
        next_offsets[topic, queue_id] = next_offset
        return pack_batch(records, queue_offsets, guess.physical_offset,
                          guess.store_timestamp_ms, self.store_host_packed)

    def _append_as_guessed(self, blob: bytes, guess: BatchGuess) -> None:
        """Under the put lock, the guess verified: the records are stamped already."""
        segment = guess.segment
        assert segment is not None
        start = guess.position
        segment.write_target[start:start + len(blob)] = blob
        segment.written_position = start + len(blob)
        self.queue_offsets.update(guess.next_offsets)
        self._segment_list.last_store_timestamp_ms = guess.store_timestamp_ms

    def _append_and_restamp(self, messages: Sequence[Message], blob: bytes,
                            results: list[PutResult]) -> None:
        """Under the put lock, the guess broken (another writer came first): one copy, then
        stamp each record in place and correct its result."""
        segment = self._active
        if segment is None or segment.size_bytes - segment.written_position < len(blob) + _RESERVE:
            segment = self._roll()
        start = segment.written_position
        target = segment.write_target
        target[start:start + len(blob)] = blob
        store_timestamp_ms = _time_ns() // 1_000_000
        queue_offsets = self.queue_offsets
        position = start
        physical = segment.start_position + start
        for message, result in zip(messages, results, strict=True):
            key = (message.topic, message.queue_id)
            queue_offset = queue_offsets.get(key, 0)
            queue_offsets[key] = queue_offset + 1
            _OFFSETS.pack_into(target, position + 20, queue_offset, physical)
            _TIMESTAMP.pack_into(target, position + _store_timestamp_offset(target, position),
                                 store_timestamp_ms)
            result.physical_offset = physical
            result.queue_offset = queue_offset
            result.store_timestamp_ms = store_timestamp_ms
            position += result.size_bytes
            physical += result.size_bytes
        assert position == start + len(blob)
        segment.written_position = position
        self._segment_list.last_store_timestamp_ms = store_timestamp_ms

    def snapshot_queue_offsets(self) -> tuple[int, dict[QueueKey, int]]:
        """(the log's written end, every queue's next offset there), taken under the put
        lock so the two agree (a copy of one dict entry per queue)."""
        with self._put_lock:
            return self._segment_list.written_position, dict(self.queue_offsets)

    # -- group commit alignment ------------------------------------------------------------
    def seal_group(self) -> tuple[int, int]:
        """Before a group sync (`group_commit_align_bytes` set): under the put lock, end the
        group on the next boundary with a filler record (see padding.py).  Returns the end
        position of the group and the store time of its last record: the sync covers
        exactly that, and records appended meanwhile wait for the next group."""
        align_bytes = self._config.group_commit_align_bytes
        assert align_bytes > 0
        with self._put_lock:
            segment = self._active
            if segment is not None:
                position = segment.written_position
                physical_offset = segment.start_position + position
                size = padding_size_bytes(position=physical_offset,
                                          room_bytes=segment.size_bytes - position,
                                          align_bytes=align_bytes,
                                          size_bytes_min=self._padding.size_bytes_min)
                if size:
                    store_timestamp_ms = _time_ns() // 1_000_000
                    segment.write_target[position:position + size] = self._padding.encode(
                        size_bytes=size, physical_offset=physical_offset,
                        store_timestamp_ms=store_timestamp_ms)
                    segment.written_position = position + size
                    self._segment_list.last_store_timestamp_ms = store_timestamp_ms
                    count, total_bytes = self.padding_totals
                    self.padding_totals = (count + 1, total_bytes + size)
            return self._segment_list.written_position, self._segment_list.last_store_timestamp_ms

    # -- follower ----------------------------------------------------------------------------
    def append_raw(self, position: int, data: bytes | bytearray | memoryview) -> int:
        """A follower's append of the master's bytes at exactly `position`, which must be the
        end of this log (an empty log starts at any segment boundary); returns the new end.
        Raises `ReplicationGapError` (nothing appended) for a gap, an overlap, or bytes that
        are not whole records of this segment; `SegmentCreateError` if the next segment
        cannot be made.  The master's BLANK tails come with the bytes: no roll writes one."""
        size_bytes = len(data)
        assert size_bytes > 0
        with self._put_lock:
            segment = self._active
            if segment is None:
                if position % self._segment_list.segment_size_bytes:
                    raise ReplicationGapError(f"an empty log starts at a segment boundary, "
                                              f"not at {position}")
                segment = self._start_raw_segment(position)
            elif position != segment.start_position + segment.written_position:
                raise ReplicationGapError(f"bytes at {position}, but this log ends at "
                                          f"{segment.start_position + segment.written_position}")
            elif segment.is_full:
                segment = self._start_raw_segment(segment.end_position)
            at = segment.written_position
            store_timestamp_ms = check_chunk(data, position=position,
                                             segment_room_bytes=segment.size_bytes - at)
            segment.write_target[at:at + size_bytes] = data
            segment.written_position = at + size_bytes
            if store_timestamp_ms:
                self._segment_list.last_store_timestamp_ms = store_timestamp_ms
        if self._after_append is not None:
            self._after_append(position + size_bytes)
        return position + size_bytes

    def _start_raw_segment(self, start_position: int) -> CommitLogSegment:
        try:
            self._active = self._start_segment(start_position)
        except _Refused as refused:
            raise SegmentCreateError(refused.reason) from None
        return self._active

    # -- segments ----------------------------------------------------------------------------
    def _roll(self) -> CommitLogSegment:
        """Under the put lock: end the active segment with a BLANK and start the next.

        RocketMQ keeps 8 bytes free at the end of every segment for the BLANK record, so a
        record never exactly fills a segment.
        """
        segment = self._active
        if segment is not None and not segment.is_full:
            free = segment.size_bytes - segment.written_position
            assert free >= _RESERVE, "the BLANK reserve was not kept"
            record.write_blank(segment.write_target, segment.written_position, free)
            segment.written_position = segment.size_bytes
            if self._after_append is not None:
                self._after_append(segment.end_position)
        next_start = (segment.end_position if segment is not None
                      else self._segment_list.min_position)
        self._active = self._start_segment(next_start)
        return self._active

    def _start_segment(self, start_position: int) -> CommitLogSegment:
        buffer: mmap.mmap | None = None
        if self._pool is not None:
            try:
                buffer = self._pool.borrow(timeout_ms=self._config.pool_borrow_timeout_ms)
            except BufferPoolExhausted as error:
                raise _Refused(PutStatus.OS_PAGECACHE_BUSY, str(error)) from None
        try:
            segment = self._allocator.take(start_position)
        except SegmentCreateError as error:
            if buffer is not None and self._pool is not None:
                self._pool.give_back(buffer)
            status = (PutStatus.SERVICE_NOT_AVAILABLE if isinstance(error, DiskFullError)
                      else PutStatus.CREATE_MAPPED_FILE_FAILED)
            raise _Refused(status, str(error)) from None
        if buffer is not None:
            segment.attach_write_buffer(buffer)
        self._segment_list.append(segment)
        return segment


def _store_timestamp_offset(buffer: mmap.mmap, position: int) -> int:
    """Where STORETIMESTAMP sits in the record at `position` (after a 4- or 16-byte born
    host, per its SYSFLAG)."""
    sysflag = int.from_bytes(buffer[position + 36:position + 40], "big")
    layout = record.LAYOUTS[bool(sysflag & record.SysFlag.BORN_HOST_V6), False, False]
    return layout.store_timestamp_offset


_NO_TRANSACTIONS = ("a batch takes no transaction messages (RocketMQ's CommitLog refuses them "
                    "too): send each one alone")


def _refuse_transactions(messages: Sequence[Message]) -> None:
    """The batch's own check, which comes before any message's: raises `MessageIllegalError`
    if a message has transaction bits (or what `&` raises for a SYSFLAG of another type).
    `_encode_batch` folds it into its loop and runs it whole only when a message fails."""
    if any(message.sysflag & record.TRANSACTION_TYPE_MASK for message in messages):
        raise MessageIllegalError(_NO_TRANSACTIONS)


def _all(messages: Sequence[Message], status: PutStatus, reason: str) -> list[PutResult]:
    return [PutResult(status, reason=reason) for _ in messages]


def _busy(config: StoreConfig) -> PutResult:
    return PutResult(PutStatus.OS_PAGECACHE_BUSY,
                     reason=f"put lock not acquired within {config.put_lock_timeout_ms} ms "
                            f"(put_lock_timeout_ms)")
