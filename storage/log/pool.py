"""The transient store pool: segment-sized write buffers allocated once, at open.

With the pool on, the put path appends into a borrowed buffer instead of the file mapping;
the commit service copies committed bytes into the file with `os.pwrite` (which releases the
GIL), and readers only ever see the file.  A buffer goes back when its segment is fully
committed.  Borrowing waits up to a bound and then raises `BufferPoolExhausted`: the put path
turns that into OS_PAGECACHE_BUSY (back-pressure), never a hang and never `None` (RocketMQ's
`borrowBuffer` can return null).
"""

from __future__ import annotations

import collections
import mmap
import threading

from ..errors import BufferPoolExhausted
from ..files.preallocate import lock_in_memory, populate_for_write


class TransientStorePool:
    """`buffer_count` anonymous mappings of `buffer_size_bytes`, faulted in at open."""

    def __init__(self, *, buffer_count: int, buffer_size_bytes: int, lock_memory: bool) -> None:
        assert buffer_count > 0
        assert buffer_size_bytes > 0
        self.buffer_count = buffer_count
        self.buffer_size_bytes = buffer_size_bytes
        self._buffers: list[mmap.mmap] = []
        for _ in range(buffer_count):
            buffer = mmap.mmap(-1, buffer_size_bytes)
            # Allocate for real now (RocketMQ mlocks): the put path must never fault.
            populate_for_write(buffer)
            if lock_memory:
                lock_in_memory(buffer)
            self._buffers.append(buffer)
        self._free: collections.deque[mmap.mmap] = collections.deque(self._buffers)
        self._condition = threading.Condition()

    @property
    def free_count(self) -> int:
        return len(self._free)

    def borrow(self, *, timeout_ms: int) -> mmap.mmap:
        with self._condition:
            if not self._condition.wait_for(lambda: self._free, timeout=timeout_ms / 1000):
                raise BufferPoolExhausted(
                    f"all {self.buffer_count} transient store pool buffers are in use "
                    f"(waited {timeout_ms} ms for the commit service to return one)")
            return self._free.popleft()

    def give_back(self, buffer: mmap.mmap) -> None:
        assert any(buffer is known for known in self._buffers), "not a buffer of this pool"
        with self._condition:
            assert all(buffer is not free for free in self._free), "buffer returned twice"
            self._free.appendleft(buffer)
            self._condition.notify()

    def close(self) -> None:
        for buffer in self._buffers:
            buffer.close()
        self._buffers.clear()
        self._free.clear()

