"""The commit log's put path: encode outside the lock, stamp and copy under it.

    put(msg):  encode (topic rules, sizes, CRC)          no lock
               take the put lock (≤ put_lock_timeout_ms, else OS_PAGECACHE_BUSY)
               roll if the record does not fit: BLANK tail, next segment (+ pool buffer)
               copy the bytes into the mapping or the pool buffer
               stamp QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP in place
               advance wrote_position, the queue's next offset
               release; wake the commit service; sync flush: park until synced

A batch is encoded record by record, joined, and copied with one slice assignment: one
contiguous write with consecutive queue offsets per queue.  A record never straddles two
segments; every full segment ends with a BLANK record.
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
from .errors import BufferPoolExhausted, MessageIllegalError, SegmentCreateError
from .message import Message, MessageEncoder, PutResult, PutStatus
from .pool import TransientStorePool
from .segment import CommitLogSegment
from .segment_queue import SegmentQueue

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]


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
                 queue_offsets: dict[QueueKey, int],
                 refusal: Callable[[], str | None]) -> None:
        self._queue = queue
        self._config = config
        self._allocator = allocator
        self._pool = pool
        self._encoder = MessageEncoder(config)
        self._store_host_packed = self._encoder.store_host_packed
        self.queue_offsets = queue_offsets
        """Next queue offset per (topic, queue id); only touched under the put lock."""
        self._refusal = refusal
        self._put_lock = threading.Lock()
        self._put_lock_timeout_s = config.put_lock_timeout_ms / 1000
        self.after_append: Callable[[], None] = _nothing

    @property
    def store_host_packed(self) -> bytes:
        return self._store_host_packed

    # -- put -------------------------------------------------------------------------------
    def put(self, message: Message) -> PutResult:
        refusal = self._refusal()
        if refusal is not None:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=refusal)
        try:
            encoded, store_timestamp_offset = self._encoder.encode(message)
        except MessageIllegalError as error:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=str(error))
        if not self._put_lock.acquire(timeout=self._put_lock_timeout_s):
            return _busy(self._config)
        try:
            size = len(encoded)
            segment = self._segment_with_room(size)
            position = segment.wrote_position
            physical_offset = segment.start_position + position
            key = (message.topic, message.queue_id)
            queue_offset = self.queue_offsets.get(key, 0)
            store_timestamp_ms = time.time_ns() // 1_000_000
            target = segment.write_target
            target[position:position + size] = encoded
            record.stamp_record(target, position, store_timestamp_offset=store_timestamp_offset,
                                queue_offset=queue_offset, physical_offset=physical_offset,
                                store_timestamp_ms=store_timestamp_ms)
            segment.wrote_position = position + size
            self.queue_offsets[key] = queue_offset + 1
            self._queue.last_store_timestamp_ms = store_timestamp_ms
        except _Refused as refused:
            return PutResult(refused.status, reason=refused.reason)
        finally:
            self._put_lock.release()
        self.after_append()
        return PutResult(PutStatus.PUT_OK, physical_offset, queue_offset, store_timestamp_ms,
                         size_bytes=size, store_host_packed=self._store_host_packed)

    def put_batch(self, messages: Sequence[Message]) -> list[PutResult]:
        """All or nothing: one illegal message refuses the whole batch (each result says
        which message was illegal and why)."""
        if not messages:
            return []
        refusal = self._refusal()
        if refusal is not None:
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=refusal)] * len(messages)
        encoded_records, problem = self._encode_batch(messages)
        if problem is not None:
            return [PutResult(PutStatus.MESSAGE_ILLEGAL, reason=problem)] * len(messages)
        blob = b"".join(encoded for encoded, _ in encoded_records)
        if len(blob) > self._config.put_batch_size_bytes_max:
            reason = (f"batch is {len(blob)} bytes encoded; the maximum is "
                      f"{self._config.put_batch_size_bytes_max} (put_batch_size_bytes_max)")
            return [PutResult(PutStatus.MESSAGE_ILLEGAL, reason=reason)] * len(messages)
        if not self._put_lock.acquire(timeout=self._put_lock_timeout_s):
            return [_busy(self._config)] * len(messages)
        try:
            results = self._append_batch(messages, encoded_records, blob)
        except _Refused as refused:
            return [PutResult(refused.status, reason=refused.reason)] * len(messages)
        finally:
            self._put_lock.release()
        self.after_append()
        return results

    def _encode_batch(self, messages: Sequence[Message]
                      ) -> tuple[list[tuple[bytes, int]], str | None]:
        encode = self._encoder.encode
        encoded_records = []
        for index, message in enumerate(messages):
            try:
                encoded_records.append(encode(message))
            except MessageIllegalError as error:
                return [], f"message {index} of the batch: {error}"
        return encoded_records, None

    def _append_batch(self, messages: Sequence[Message],
                      encoded_records: list[tuple[bytes, int]], blob: bytes) -> list[PutResult]:
        segment = self._segment_with_room(len(blob))
        start = segment.wrote_position
        target = segment.write_target
        target[start:start + len(blob)] = blob
        store_timestamp_ms = time.time_ns() // 1_000_000
        queue_offsets = self.queue_offsets
        host = self._store_host_packed
        stamp = record.stamp_record
        position = start
        physical_base = segment.start_position
        results = []
        for message, (encoded, store_timestamp_offset) in zip(messages, encoded_records,
                                                              strict=True):
            key = (message.topic, message.queue_id)
            queue_offset = queue_offsets.get(key, 0)
            queue_offsets[key] = queue_offset + 1
            stamp(target, position, store_timestamp_offset=store_timestamp_offset,
                  queue_offset=queue_offset, physical_offset=physical_base + position,
                  store_timestamp_ms=store_timestamp_ms)
            results.append(PutResult(PutStatus.PUT_OK, physical_base + position, queue_offset,
                                     store_timestamp_ms, size_bytes=len(encoded),
                                     store_host_packed=host))
            position += len(encoded)
        assert position == start + len(blob)
        segment.wrote_position = position
        self._queue.last_store_timestamp_ms = store_timestamp_ms
        return results

    # -- segments ----------------------------------------------------------------------------
    def _segment_with_room(self, size_bytes: int) -> CommitLogSegment:
        """The segment to append `size_bytes` to, rolling with a BLANK tail if needed.

        RocketMQ keeps 8 bytes free at the end of every segment for the BLANK record, so a
        record never exactly fills a segment.  Called under the put lock.
        """
        segment = self._queue.last
        if segment is not None and not segment.is_full:
            free = segment.size_bytes - segment.wrote_position
            if size_bytes + record.BLANK_SIZE_BYTES <= free:
                return segment
            self._end_segment(segment)
        next_start = segment.end_position if segment is not None else self._queue.min_position
        return self._start_segment(next_start)

    def _end_segment(self, segment: CommitLogSegment) -> None:
        free = segment.size_bytes - segment.wrote_position
        assert free >= record.BLANK_SIZE_BYTES, "the BLANK reserve was not kept"
        record.write_blank(segment.write_target, segment.wrote_position, free)
        segment.wrote_position = segment.size_bytes
        self.after_append()

    def _start_segment(self, start_position: int) -> CommitLogSegment:
        buffer: mmap.mmap | None = None
        if self._pool is not None:
            try:
                buffer = self._pool.borrow(timeout_ms=self._config.pool_borrow_timeout_ms)
            except BufferPoolExhausted as error:
                raise _Refused(PutStatus.OS_PAGECACHE_BUSY, str(error)) from None
        try:
            segment = self._allocator.take(start_position)
        except DiskFullError as error:
            if buffer is not None and self._pool is not None:
                self._pool.give_back(buffer)
            raise _Refused(PutStatus.SERVICE_NOT_AVAILABLE, str(error)) from None
        except SegmentCreateError as error:
            if buffer is not None and self._pool is not None:
                self._pool.give_back(buffer)
            raise _Refused(PutStatus.CREATE_MAPPED_FILE_FAILED, str(error)) from None
        segment.write_buffer = buffer
        self._queue.append(segment)
        return segment


def _busy(config: StoreConfig) -> PutResult:
    return PutResult(PutStatus.OS_PAGECACHE_BUSY,
                     reason=f"put lock not acquired within {config.put_lock_timeout_ms} ms "
                            f"(put_lock_timeout_ms)")


def _nothing() -> None:
    return None
