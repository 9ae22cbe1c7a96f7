"""`ReadCache`: hot data for `get_range`, in memory blocks pooled by size class (the race API).

An entry is one message's data for (topic, queue id, queue offset), copied into a block: a
preallocated `bytearray` of the smallest size class that holds it (data larger than the last
class is not cached).  `append` adds what it made durable; a prefetch adds the range after the
one a reader just read; `take` hands entries out once (a read-once cache, as in the race: a
reader moves forward, so what it read is not read again) and drops the queue's entries below the
offset it was asked for, which that reader has moved past.

Memory is bounded by `capacity_bytes` counted in blocks, free or in use, never above it.
A block freed by `take` or eviction goes to its class's free list and is reused before any
new one is allocated.  When a block of class c is needed:

    1. a free block of class c                                 (reuse, no allocation)
    2. a new block, if allocated + c <= capacity_bytes
    3. drop a free block of another class (the largest first), then try 2 again
    4. evict the oldest entry (insertion order), block to its free list, then try 1 again

Step 3 comes before 4, unlike the race design this cache follows, which evicts first: a free
block holds no data, so dropping it costs no hit, while evicting an entry may cost one (a reader
that freed many small blocks must not make a large append evict live entries).  The capacity
holds at least one block of the largest class (checked in `StoreConfig`), so 1–4 always end with
a block.

Thread-safe: one lock around every operation (each is a dict lookup and a <= 17.5 KiB copy).
`PrefetchService` is the one background thread that loads ranges into the cache.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence

from ..errors import StoreError
from ..service_thread import FatalHandler, ServiceThread

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]
EntryKey = tuple[str, int, int]
"""(topic, queue id, queue offset)."""


@dataclasses.dataclass(frozen=True)
class ReadCacheStats:
    hits: int
    """Offsets `take` served from the cache."""
    misses: int
    """Offsets `take` was asked for and did not hold (read from the log instead)."""
    evictions: int
    """Entries evicted, oldest first, to make room."""
    dropped: int
    """Entries dropped unread because their queue's reader had moved past them."""
    prefetched: int
    """Entries a prefetch added."""
    prefetch_dropped: int
    """Prefetch requests dropped because the pending queue was full."""
    entries: int
    cached_bytes: int
    """Data bytes held by entries."""
    allocated_bytes: int
    """Bytes of every allocated block, free or in use: at most `capacity_bytes`."""
    blocks_by_class: dict[int, int]
    """Class size → blocks allocated now (free or in use)."""
    allocations_by_class: dict[int, int]
    """Class size → blocks ever allocated (flat while blocks are reused)."""


class _Entry:
    __slots__ = ("block", "class_index", "size_bytes")

    def __init__(self, block: bytearray, size_bytes: int, class_index: int) -> None:
        self.block = block
        self.size_bytes = size_bytes
        self.class_index = class_index


class ReadCache:
    def __init__(self, *, capacity_bytes: int, size_classes_bytes: Sequence[int]) -> None:
        assert list(size_classes_bytes) == sorted(set(size_classes_bytes))
        assert 0 < size_classes_bytes[-1] <= capacity_bytes
        self.capacity_bytes = capacity_bytes
        self.size_classes_bytes = tuple(size_classes_bytes)
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[EntryKey, _Entry] = collections.OrderedDict()
        self._queues: dict[QueueKey, _QueueOffsets] = {}
        self._free: list[list[bytearray]] = [[] for _ in self.size_classes_bytes]
        self._blocks = [0] * len(self.size_classes_bytes)
        self._allocations = [0] * len(self.size_classes_bytes)
        self._allocated_bytes = 0
        self._cached_bytes = 0
        self._hits = self._misses = self._evictions = self._dropped = 0
        self._prefetched = 0
        self.prefetch_dropped = 0
        """Counted by `PrefetchService`, reported with the rest."""

    def class_index(self, size_bytes: int) -> int | None:
        """The smallest class holding `size_bytes`, or None if none does."""
        index = bisect.bisect_left(self.size_classes_bytes, size_bytes)
        return index if index < len(self.size_classes_bytes) else None

    def put(self, topic: str, queue_id: int, offset: int, data: bytes | bytearray | memoryview,
            *, prefetched: bool = False) -> bool:
        """Copy `data` in as the entry of (topic, queue id, offset); False if it is too large
        or already cached."""
        size = len(data)
        class_index = self.class_index(size)
        if class_index is None:
            return False
        key = (topic, queue_id, offset)
        with self._lock:
            if key in self._entries:
                return False
            block = self._block(class_index)
            block[:size] = data
            self._entries[key] = _Entry(block, size, class_index)
            queue = self._queues.get((topic, queue_id))
            if queue is None:
                queue = self._queues[topic, queue_id] = _QueueOffsets()
            queue.add(offset)
            self._cached_bytes += size
            self._prefetched += prefetched
            assert self._allocated_bytes <= self.capacity_bytes
        return True

    def take(self, topic: str, queue_id: int, start: int, end: int) -> dict[int, bytes]:
        """Hand out (and remove) the cached entries of offsets [start, end); drop the queue's
        entries below `start`.  Counts a hit per offset returned, a miss per one not."""
        found: dict[int, bytes] = {}
        with self._lock:
            queue = self._queues.get((topic, queue_id))
            if queue is not None:
                for offset in queue.below(start):
                    self._remove((topic, queue_id, offset), queue, dropped=True)
                for offset in range(start, end):
                    entry = self._remove((topic, queue_id, offset), queue, dropped=False)
                    if entry is not None:
                        with memoryview(entry.block) as view:
                            found[offset] = bytes(view[:entry.size_bytes])
            self._hits += len(found)
            self._misses += end - start - len(found)
        return found

    def missing(self, topic: str, queue_id: int, start: int, end: int) -> list[int]:
        """The offsets of [start, end) not cached (what a prefetch still has to load)."""
        with self._lock:
            return [offset for offset in range(start, end)
                    if (topic, queue_id, offset) not in self._entries]

    def stats(self) -> ReadCacheStats:
        with self._lock:
            classes = self.size_classes_bytes
            return ReadCacheStats(
                hits=self._hits, misses=self._misses, evictions=self._evictions,
                dropped=self._dropped, prefetched=self._prefetched,
                prefetch_dropped=self.prefetch_dropped, entries=len(self._entries),
                cached_bytes=self._cached_bytes, allocated_bytes=self._allocated_bytes,
                blocks_by_class=dict(zip(classes, self._blocks, strict=True)),
                allocations_by_class=dict(zip(classes, self._allocations, strict=True)))

    # -- under the lock ----------------------------------------------------------------------
    def _remove(self, key: EntryKey, queue: _QueueOffsets, *, dropped: bool) -> _Entry | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        queue.discard(key[2])
        self._release(entry)
        self._dropped += dropped
        return entry

    def _release(self, entry: _Entry) -> None:
        self._cached_bytes -= entry.size_bytes
        self._free[entry.class_index].append(entry.block)

    def _block(self, class_index: int) -> bytearray:
        """A block of the class: steps 1–4 of the module docstring."""
        size = self.size_classes_bytes[class_index]
        while True:
            free = self._free[class_index]
            if free:
                return free.pop()
            if self._allocated_bytes + size <= self.capacity_bytes:
                self._allocated_bytes += size
                self._blocks[class_index] += 1
                self._allocations[class_index] += 1
                return bytearray(size)
            if not self._drop_free_block(other_than=class_index):
                self._evict_oldest()

    def _drop_free_block(self, *, other_than: int) -> bool:
        for index in reversed(range(len(self._free))):
            if index != other_than and self._free[index]:
                self._free[index].pop()
                self._allocated_bytes -= self.size_classes_bytes[index]
                self._blocks[index] -= 1
                return True
        return False

    def _evict_oldest(self) -> None:
        assert self._entries, "capacity below one block of the largest class"
        (topic, queue_id, offset), entry = self._entries.popitem(last=False)
        self._queues[topic, queue_id].discard(offset)
        self._release(entry)
        self._evictions += 1


class _QueueOffsets:
    """The cached offsets of one queue and a lower bound of them (`low`), so that dropping
    the entries below a reader's offset costs min(offsets held, offsets skipped)."""

    __slots__ = ("low", "offsets")

    def __init__(self) -> None:
        self.offsets: set[int] = set()
        self.low = 0

    def add(self, offset: int) -> None:
        if not self.offsets or offset < self.low:
            self.low = offset
        self.offsets.add(offset)

    def discard(self, offset: int) -> None:
        self.offsets.discard(offset)

    def below(self, start: int) -> list[int]:
        """The cached offsets below `start` (the caller removes them); `low` moves up."""
        if self.low >= start or not self.offsets:
            return []
        if start - self.low <= len(self.offsets):
            stale = [offset for offset in range(self.low, start) if offset in self.offsets]
        else:
            stale = [offset for offset in self.offsets if offset < start]
        self.low = start
        return stale


Load = Callable[[str, int, int, int], dict[int, bytes]]
"""(topic, queue id, start, end) → the bodies of the offsets of [start, end) readable now."""


class PrefetchService(ServiceThread):
    """The one loader thread: takes prefetch requests from a bounded queue (a request that
    finds it full is dropped: a prefetch is a hint) and loads what the cache is missing."""

    name = "read-cache-prefetch"
    IDLE_WAIT_MS = 100
    """Only bounds the wait when idle: every `submit` wakes the thread."""

    def __init__(self, cache: ReadCache, *, load: Load, pending_max: int,
                 on_fatal: FatalHandler) -> None:
        super().__init__(on_fatal=on_fatal)
        assert pending_max > 0
        self._cache = cache
        self._load = load
        self._pending_max = pending_max
        self._pending: collections.deque[tuple[str, int, int, int]] = collections.deque()
        self._pending_lock = threading.Lock()
        self.failures = 0
        self.last_failure: str | None = None

    def submit(self, topic: str, queue_id: int, start: int, end: int) -> bool:
        """Queue a load of [start, end); False (and counted) if the queue is full."""
        with self._pending_lock:
            if len(self._pending) >= self._pending_max:
                self._cache.prefetch_dropped += 1
                return False
            self._pending.append((topic, queue_id, start, end))
        self.wakeup()
        return True

    def run_once(self) -> None:
        with self._pending_lock:
            request = self._pending.popleft() if self._pending else None
        if request is None:
            self.wait_for_running(self.IDLE_WAIT_MS)
            return
        topic, queue_id, start, end = request
        missing = self._cache.missing(topic, queue_id, start, end)
        if not missing:
            return
        try:
            loaded = self._load(topic, queue_id, missing[0], missing[-1] + 1)
        except StoreError as error:  # e.g. the store closing: a prefetch is only a hint
            self.failures += 1
            self.last_failure = str(error)
            log.debug("prefetch of %s/%d [%d, %d) failed: %s", topic, queue_id, start, end,
                      error)
            return
        for offset, data in loaded.items():
            self._cache.put(topic, queue_id, offset, data, prefetched=True)
