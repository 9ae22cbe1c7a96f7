"""The commit log's put path: encode outside the lock, stamp and copy under it.

    put(msg):  encode (topic rules, sizes, CRC)          no lock
               take the put lock (≤ put_lock_timeout_ms, else OS_PAGECACHE_BUSY)
               roll if the record does not fit: BLANK tail, next segment (+ pool buffer)
               copy the bytes into the mapping or the pool buffer
               stamp QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP in place
               advance wrote_position, the queue's next offset
               release; wake the commit service; (sync flush: the store parks the caller)

A batch is encoded record by record, joined, and copied with one slice assignment: one
contiguous write with consecutive queue offsets per queue.  A record never straddles two
segments; every full segment ends with a BLANK record.

This is the hottest code in the project: the put methods inline the stamping and the
room check on purpose (each avoided call is ~0.1 µs of a ~3 µs put).
"""

from __future__ import annotations

import logging
import mmap
import threading
import time
from collections.abc import Callable, Sequence

from . import record
from .allocator import DiskFullError, SegmentAllocator
from .config import StoreConfig
from .encoder import MessageEncoder
from .errors import BufferPoolExhausted, MessageIllegalError, SegmentCreateError
from .message import Message, PutResult, PutStatus
from .pool import TransientStorePool
from .segment import CommitLogSegment
from .segment_queue import SegmentQueue

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
    """Appends records to the segment queue.  Thread-safe; one instance per store."""

    def __init__(self, queue: SegmentQueue, config: StoreConfig, *,
                 allocator: SegmentAllocator, pool: TransientStorePool | None,
                 queue_offsets: dict[QueueKey, int]) -> None:
        self._queue = queue
        self._config = config
        self._allocator = allocator
        self._pool = pool
        encoder = MessageEncoder(config)
        self._encode = encoder.encode
        self.store_host_packed = encoder.store_host_packed
        self.queue_offsets = queue_offsets
        """Next queue offset per (topic, queue id); only touched under the put lock."""
        self.refused_reason: str | None = None
        """Set when the store stops accepting writes (closed, failed sync): every put then
        returns SERVICE_NOT_AVAILABLE with this reason."""
        self.after_append: Callable[[], None] | None = None
        """Called after each append outside the lock (the pool's commit-service wakeup)."""
        self._put_lock = threading.Lock()
        self._put_lock_timeout_s = config.put_lock_timeout_ms / 1000
        self._active = queue.last

    # -- put -------------------------------------------------------------------------------
    def put(self, message: Message) -> PutResult:
        if self.refused_reason is not None:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=self.refused_reason)
        try:
            encoded, store_timestamp_offset = self._encode(message)
        except MessageIllegalError as error:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=str(error))
        size = len(encoded)
        if not self._put_lock.acquire(True, self._put_lock_timeout_s):
            return _busy(self._config)
        try:
            segment = self._active
            if segment is None or segment.size_bytes - segment.wrote_position < size + _RESERVE:
                segment = self._roll()
            position = segment.wrote_position
            physical_offset = segment.start_position + position
            key = (message.topic, message.queue_id)
            queue_offset = self.queue_offsets.get(key, 0)
            store_timestamp_ms = _time_ns() // 1_000_000
            target = segment.write_target
            target[position:position + size] = encoded
            _OFFSETS.pack_into(target, position + 20, queue_offset, physical_offset)
            _TIMESTAMP.pack_into(target, position + store_timestamp_offset, store_timestamp_ms)
            segment.wrote_position = position + size
            self.queue_offsets[key] = queue_offset + 1
            self._queue.last_store_timestamp_ms = store_timestamp_ms
        except _Refused as refused:
            return PutResult(refused.status, reason=refused.reason)
        finally:
            self._put_lock.release()
        if self.after_append is not None:
            self.after_append()
        return PutResult(_PUT_OK, physical_offset, queue_offset, store_timestamp_ms, size, "",
                         self.store_host_packed)

    def put_batch(self, messages: Sequence[Message]) -> list[PutResult]:
        """All or nothing: one illegal message refuses the whole batch (each result says
        which message was illegal and why)."""
        if not messages:
            return []
        if self.refused_reason is not None:
            return _all(messages, PutStatus.SERVICE_NOT_AVAILABLE, self.refused_reason)
        encode = self._encode
        encoded_records = []
        try:
            for message in messages:
                encoded_records.append(encode(message))
        except MessageIllegalError as error:
            reason = f"message {len(encoded_records)} of the batch: {error}"
            return _all(messages, PutStatus.MESSAGE_ILLEGAL, reason)
        blob = b"".join([encoded for encoded, _ in encoded_records])
        if len(blob) > self._config.put_batch_size_bytes_max:
            return _all(messages, PutStatus.MESSAGE_ILLEGAL,
                        f"batch is {len(blob)} bytes encoded; the maximum is "
                        f"{self._config.put_batch_size_bytes_max} (put_batch_size_bytes_max)")
        if not self._put_lock.acquire(True, self._put_lock_timeout_s):
            return [_busy(self._config)] * len(messages)
        try:
            results = self._append_batch(messages, encoded_records, blob)
        except _Refused as refused:
            return _all(messages, refused.status, refused.reason)
        finally:
            self._put_lock.release()
        if self.after_append is not None:
            self.after_append()
        return results

    def _append_batch(self, messages: Sequence[Message],
                      encoded_records: list[tuple[bytes, int]], blob: bytes) -> list[PutResult]:
        """Under the put lock: one copy, then stamp each record in place."""
        segment = self._active
        if segment is None or segment.size_bytes - segment.wrote_position < len(blob) + _RESERVE:
            segment = self._roll()
        start = segment.wrote_position
        target = segment.write_target
        target[start:start + len(blob)] = blob
        store_timestamp_ms = _time_ns() // 1_000_000
        queue_offsets = self.queue_offsets
        host = self.store_host_packed
        pack_offsets = _OFFSETS.pack_into
        pack_timestamp = _TIMESTAMP.pack_into
        position = start
        physical = segment.start_position + start
        results = []
        for message, (encoded, store_timestamp_offset) in zip(messages, encoded_records,
                                                              strict=True):
            key = (message.topic, message.queue_id)
            queue_offset = queue_offsets.get(key, 0)
            queue_offsets[key] = queue_offset + 1
            pack_offsets(target, position + 20, queue_offset, physical)
            pack_timestamp(target, position + store_timestamp_offset, store_timestamp_ms)
            size = len(encoded)
            results.append(PutResult(_PUT_OK, physical, queue_offset, store_timestamp_ms, size,
                                     "", host))
            position += size
            physical += size
        assert position == start + len(blob)
        segment.wrote_position = position
        self._queue.last_store_timestamp_ms = store_timestamp_ms
        return results

    # -- segments ----------------------------------------------------------------------------
    def _roll(self) -> CommitLogSegment:
        """Under the put lock: end the active segment with a BLANK and start the next.

        RocketMQ keeps 8 bytes free at the end of every segment for the BLANK record, so a
        record never exactly fills a segment.
        """
        segment = self._active
        if segment is not None and not segment.is_full:
            free = segment.size_bytes - segment.wrote_position
            assert free >= _RESERVE, "the BLANK reserve was not kept"
            record.write_blank(segment.write_target, segment.wrote_position, free)
            segment.wrote_position = segment.size_bytes
            if self.after_append is not None:
                self.after_append()
        next_start = segment.end_position if segment is not None else self._queue.min_position
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
        self._queue.append(segment)
        return segment


def _all(messages: Sequence[Message], status: PutStatus, reason: str) -> list[PutResult]:
    return [PutResult(status, reason=reason) for _ in messages]


def _busy(config: StoreConfig) -> PutResult:
    return PutResult(PutStatus.OS_PAGECACHE_BUSY,
                     reason=f"put lock not acquired within {config.put_lock_timeout_ms} ms "
                            f"(put_lock_timeout_ms)")
