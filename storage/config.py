"""Every bound of the storage engine, with its unit, its reason and its RocketMQ name.

One frozen dataclass, checked once at construction (`__post_init__`): a bad combination is a
`ConfigError` naming the settings involved, never a surprise on the hot path.  The services,
the CLI and the operator's ConfigMap use these exact names (see docs/settings.md).
"""

from __future__ import annotations

import dataclasses
import enum

from .config_checks import (
    check_multiples,
    check_name_and_property_sizes,
    check_non_negative,
    check_positive,
    check_race,
    check_ratios,
    check_record_fits,
    check_role,
)
from .format.delay_levels import DEFAULT_DELAY_LEVELS, DelayLevels
from .format.hosts import parse_host
from .roles import BrokerRole

PAGE_SIZE_BYTES = 4096
"""The OS page: the unit of commit and flush thresholds (RocketMQ `OS_PAGE_SIZE`)."""

MIB = 1 << 20
GIB = 1 << 30


class FlushMode(enum.Enum):
    """`flushDiskType`: when a put is acknowledged relative to fdatasync."""

    ASYNC = "async"
    """Acknowledge after the copy into memory; a background service syncs every interval."""
    SYNC = "sync"
    """Acknowledge only after the record's end position is synced (group commit)."""


class CorruptionPolicy(enum.Enum):
    """What opening a store does with damage recovery finds (recovery/recovery.py): bytes
    that hold no valid record where one was due, below records that are valid."""

    SKIP = "skip"
    """Keep serving everything else: the damage is reported (recovery report, ERROR log,
    metric, `mqstore verify`) and reads of a damaged record answer MESSAGE_CORRUPT; a
    replica can refill it."""
    REFUSE = "refuse"
    """Refuse to open (`StoreCorruptError` names the damage): for whoever prefers to repair
    by hand before anything is served."""


class PreallocateMethod(enum.Enum):
    """How a new segment file is prepared before the put path first writes into it.

    See `preallocate.py` for what each costs on the hot path and on fdatasync.
    """

    NONE = "none"
    """Sparse file: every first write faults and allocates on the hot path."""
    FALLOCATE = "fallocate"
    """Unwritten extents: first writes still fault and convert extents."""
    ZERO_FILL = "zero-fill"
    """Write zeros with pwrite, then fdatasync."""
    POPULATE = "populate"
    """fallocate, map, MADV_POPULATE_WRITE, fdatasync (zero-fill where the kernel lacks
    MADV_POPULATE_WRITE): the measured best for writes through the mapping."""
    AUTO = "auto"
    """POPULATE, except FALLOCATE with the pool on under async flush: see `preallocate.py`."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """The engine's settings.  Defaults follow RocketMQ 4.9.4 unless a comment says why not."""

    # -- commit log layout -------------------------------------------------------------------
    segment_size_bytes: int = GIB
    """`mappedFileSizeCommitLog`.  1 GiB: few files to open and map, and a roll (BLANK tail plus
    a new mapping) once per ~1M messages of 1 KiB.  Tests use 64 KiB–1 MiB."""

    message_body_size_bytes_max: int = 4 * MIB
    """`maxMessageSize` (4.9.x limits the body only).  A record must fit in one segment."""

    properties_size_bytes_max: int = 32767
    """PROPLEN is a signed short on disk, so 32767 is also the format's own ceiling."""

    topic_size_bytes_max: int = 127
    """127: RocketMQ 4.9.x reads the v1 topic length byte as signed, so its decoder and its
    recovery stop at a longer topic (measured with the interop test).  Raising this (up to
    255, ext4's NAME_MAX, since a topic names a `consumequeue/` directory) lets longer topics
    be written as v2 records (2-byte length), which RocketMQ ≥ 5 reads and 4.9.x does not."""

    put_batch_size_bytes_max: int = 32 * MIB
    """Largest `put_batch` in encoded bytes: one batch is one contiguous write into one
    segment, so it must fit in a segment beside the 8-byte BLANK reserve."""

    store_host: str = "127.0.0.1:10911"
    """`brokerIP1:listenPort`, written in every record's STOREHOST and in its offset msg id."""

    # -- put lock ------------------------------------------------------------------------------
    put_lock_timeout_ms: int = 1000
    """`osPageCacheBusyTimeOutMills`: a put that cannot take the put lock within this time
    returns OS_PAGECACHE_BUSY instead of queueing behind a stalled writer."""

    # -- preallocation -------------------------------------------------------------------------
    preallocate_method: PreallocateMethod = PreallocateMethod.AUTO
    """Measured default, see `preallocate.py` and `effective_preallocate_method`."""

    preallocate_ahead_count: int = 1
    """Segments prepared in the background beyond the one being written (RocketMQ: 1)."""

    allocate_wait_ms: int = 5000
    """How long a put that rolls waits for the next segment before CREATE_MAPPED_FILE_FAILED
    (RocketMQ `AllocateMappedFileService` waits 5 s)."""

    segment_warmup_enabled: bool = False
    """`warmMapedFileEnable`: also map every page of a new segment before use
    (MADV_POPULATE_WRITE), so the put path takes no page faults at all."""

    # -- transient store pool -------------------------------------------------------------------
    pool_enabled: bool = False
    """`transientStorePoolEnable`: appends go to a pooled buffer, a commit service copies
    committed bytes into the file; readers see only committed bytes."""

    pool_buffer_count: int = 5
    """`transientStorePoolSize`: buffers of `segment_size_bytes` each, allocated at open."""

    pool_borrow_timeout_ms: int = 200
    """How long a roll waits for a free buffer before OS_PAGECACHE_BUSY (back-pressure).  One
    `commit_thorough_interval_ms`: long enough for a commit in progress to return a buffer."""

    pool_lock_memory: bool = False
    """mlock the pool buffers (RocketMQ always does; off by default because it needs
    RLIMIT_MEMLOCK headroom that containers rarely grant)."""

    # -- commit service (pool only) --------------------------------------------------------------
    commit_interval_ms: int = 200
    """`commitIntervalCommitLog`: the commit service's sleep when not woken."""

    commit_pages_min: int = 4
    """`commitCommitLogLeastPages`: commit when at least 16 KiB are uncommitted ..."""

    commit_thorough_interval_ms: int = 200
    """`commitCommitLogThoroughInterval`: ... or when this long has passed since the last one."""

    # -- flush services ------------------------------------------------------------------------
    flush_mode: FlushMode = FlushMode.ASYNC
    """`flushDiskType`."""

    flush_interval_ms: int = 500
    """`flushIntervalCommitLog`: async flush period.  At 500 ms an fdatasync (≈0.2–4 ms here)
    costs under 1% of a core, and at most half a second of writes is unsynced."""

    flush_pages_min: int = 4
    """`flushCommitLogLeastPages`: async flush only when at least 16 KiB are dirty ..."""

    flush_thorough_interval_ms: int = 10_000
    """`flushCommitLogThoroughInterval`: ... or when this long has passed since the last one."""

    sync_flush_timeout_ms: int = 5000
    """`syncFlushTimeout`: a sync-flush put not synced by then returns FLUSH_DISK_TIMEOUT."""

    group_commit_align_bytes: int = 0
    """Sync flush: before each sync, end the group with a filler record on the next multiple
    of this many bytes (the 2021 Tianchi race's 4 KiB alignment; 0 = off; a power of two
    dividing `segment_size_bytes`).  Off by default, measured (`bench/race.py`): here fdatasync of
    ~76 KiB groups padded to 4 KiB moved no more payload than unaligned ones (paired, 20 runs:
    median 1.01×), the race's total time did not move (median 18 s both ways), and fillers
    cost 2.8% of the log; a lone producer would pad every message to 4 KiB.  Try it where
    rewriting a partial page costs (the race's cloud SSD)."""

    checkpoint_interval_ms: int = 1000
    """How often the flush service persists the checkpoint after a flush moved it."""

    # -- replication (roles.py) ---------------------------------------------------------------
    role: BrokerRole = BrokerRole.ASYNC_MASTER
    """`brokerRole`.  A follower refuses puts, appends only the master's bytes, and never uses
    the pool (RocketMQ 4.9.4 also turns it off on slaves): its log is written once, in order."""

    replication_sync_timeout_ms: int = 3000
    """`syncFlushTimeout` for slaves (3 s in `GroupTransferService`): a sync-master put whose
    bytes no follower confirmed by then is FLUSH_SLAVE_TIMEOUT (stored on the master only)."""

    replication_lag_bytes_max: int = 256 * MIB
    """`haSlaveFallbehindMax`: a sync-master put answers SLAVE_NOT_AVAILABLE at once unless a
    connected follower is less than this far behind its end (waiting would only time out)."""

    # -- consume queues and dispatch -------------------------------------------------------------
    consume_queue_file_size_bytes: int = 6_000_000
    """`mappedFileSizeConsumeQueue`: 300,000 entries of 20 bytes per file (sparse, below)."""
    consume_queue_allocate_step_bytes: int = 64 * 1024
    """Consume queue files keep their full length (RocketMQ loads no other) but reserve blocks
    this much at a time ahead of the entries: a new queue costs 64 KiB, not 6 MB, and a full
    disk is an OSError that stalls dispatch, never a SIGBUS (consume_queue_file.py)."""

    dispatch_enabled: bool = True
    """Build consume queues (and the index) in this process.  The writer service turns it off
    when a separate indexer process dispatches the same directory."""

    positions_publish_enabled: bool = False
    """Publish the log's positions in `positions` for other processes (the writer service)."""

    positions_publish_interval_ms: int = 1000
    """Heartbeat: republish at least this often while nothing moves."""

    positions_publish_gap_us: int = 200
    """While the log moves, republish this often: bounds a reader's staleness, not per put."""

    dispatch_interval_ms: int = 1
    """Dispatch's poll when caught up (RocketMQ's reput sleeps 1 ms): no put path wakeup."""

    dispatch_doorbell_poll_ms: int = 50
    """An indexer process's poll when caught up: the writer's doorbell starts its passes."""

    dispatch_retry_interval_ms: int = 1000
    """Retry period of a dispatch a full disk stalled (RocketMQ's consume queue write: 1 s)."""

    stalled_queue_retry_interval_ms: int = 30_000
    """Retry period of a queue its own files' error stalled: each rereads the log from there."""

    dispatch_records_per_pass_max: int = 10_000
    """Records per dispatch pass: bounds how long notices wait behind a large backlog."""

    queue_flush_interval_ms: int = 1000
    """`flushIntervalConsumeQueue`."""

    queue_flush_pages_min: int = 2
    """`flushConsumeQueueLeastPages`."""

    queue_flush_thorough_interval_ms: int = 60_000
    """`flushConsumeQueueThoroughInterval`: also persists the checkpoint's queue time."""

    get_transfer_count_max: int = 32
    """`maxTransferCountOnMessageInMemory`: messages one `get` returns at most."""

    get_transfer_bytes_max: int = 256 * 1024
    """`maxTransferBytesOnMessageInMemory`: record bytes one `get` returns at most (the first
    message is returned whatever its size)."""

    index_tags_enabled: bool | None = None
    """Index TAGS too (`topic#T#<tags>`, one 20-byte entry), as RocketMQ 5 does; 4.9 does
    not.  None: as the store's index holds (dispatch/tag_evidence.py), on for a new store."""

    read_verify_crc: bool = True
    """Reads (`get`, `message_at`, `iter_messages`) check each record's body CRC and answer
    MESSAGE_CORRUPT / `CorruptRecordError` for a damaged one instead of serving it.  On: a
    flipped byte is never served as good; what it costs is in docs/benchmarks."""

    # -- race API (append / get_range) and its read cache ------------------------------------
    range_read_wait_ms: int = 1000
    """How long `get_range` waits for dispatch to put offsets the writer already assigned
    into the consume queue (dispatch lags by about one 1 ms pass; 1 s means it is stalled)."""

    read_cache_enabled: bool = False
    """Keep appended data (and prefetched ranges) in memory for `get_range` (the race API)."""

    read_cache_capacity_bytes: int = 64 * MIB
    """Bound on the cache's blocks, free or in use: 64 MiB holds ~7,500 race messages of
    8.7 KiB (the mean of 100 B–17 KiB), about a second of appends at this disk's sync rate."""

    read_cache_size_classes_bytes: tuple[int, ...] = (1024, 3584, 7168, 10752, 14336, 17920)
    """Block sizes, ascending: a small class, then the race's 17 KiB range in five 3.5 KiB
    steps.  Data larger than the last class is not cached."""

    read_cache_prefetch_enabled: bool = True
    """With the cache on, each `get_range` queues a background load of the next range."""

    read_cache_prefetch_pending_max: int = 64
    """Prefetches waiting for the one loader thread; more are dropped, not queued."""

    # -- index ---------------------------------------------------------------------------------
    index_enabled: bool = True
    """`messageIndexEnable`: index KEYS and UNIQ_KEY for `query_by_key`."""

    index_hash_slot_count: int = 5_000_000
    """`maxHashSlotNum`: hash slots per index file (4 bytes each)."""

    index_count_max: int = 20_000_000
    """`maxIndexNum`: entries per index file (20 bytes each): 420,000,040-byte files."""

    index_query_results_max: int = 64
    """`maxMsgsNumBatch`: the most messages one key query returns."""

    message_delay_levels: str = DEFAULT_DELAY_LEVELS
    """`messageDelayLevel`: the delay of each level 1..N (format/delay_levels.py); the
    indexer stamps schedule entries with their due time by it, the writer delivers by it."""

    # -- retention -------------------------------------------------------------------------------
    file_retention_hours: int = 72
    """`fileReservedTime`: a segment last written longer ago than this may be deleted."""

    delete_hours: tuple[int, ...] = (4,)
    """`deleteWhen` ("04"): local hours in which expired segments are deleted when the disk
    is not filling (deleting is I/O; do it when traffic is low)."""

    disk_max_used_ratio: float = 0.75
    """`diskMaxUsedSpaceRatio`: above it, expired segments are deleted at any hour."""

    disk_clean_forcibly_ratio: float = 0.85
    """Above it, the oldest segments are deleted whatever their age."""

    disk_warning_ratio: float = 0.90
    """Above it, writes are refused (SERVICE_NOT_AVAILABLE) until deletion brings it down."""

    clean_interval_ms: int = 10_000
    """`cleanResourceInterval`: how often retention measures the disk and deletes."""

    delete_segments_per_pass_max: int = 10
    """`deleteFileBatchMax`: segments one retention pass deletes at most."""

    # -- recovery and shutdown -------------------------------------------------------------------
    recovery_segments_max: int = 3
    """Normal (clean-shutdown) recovery validates with CRC only the last N segments that
    hold data (RocketMQ: 3, counting preallocated empty ones).  Abnormal recovery starts where
    the checkpoint says data was safely synced."""

    corruption_policy: CorruptionPolicy = CorruptionPolicy.SKIP
    """SKIP: one damaged record must not stop every producer and consumer; everything else
    stays served and the damage is reported.  REFUSE for those who repair before serving."""

    shutdown_retries_max: int = 10
    """`RETRY_TIMES_OVER`: commit and flush attempts on close before giving up loudly."""

    def __post_init__(self) -> None:
        check_positive(self, "segment_size_bytes", "message_body_size_bytes_max",
                             "put_batch_size_bytes_max", "put_lock_timeout_ms", "allocate_wait_ms",
                             "pool_buffer_count", "commit_interval_ms",
                             "commit_thorough_interval_ms", "flush_interval_ms",
                             "flush_thorough_interval_ms", "sync_flush_timeout_ms",
                             "checkpoint_interval_ms", "recovery_segments_max",
                             "shutdown_retries_max", "topic_size_bytes_max",
                             "consume_queue_file_size_bytes", "consume_queue_allocate_step_bytes",
                             "dispatch_interval_ms", "dispatch_doorbell_poll_ms",
                             "dispatch_records_per_pass_max", "dispatch_retry_interval_ms",
                             "stalled_queue_retry_interval_ms", "positions_publish_interval_ms",
                             "positions_publish_gap_us", "queue_flush_interval_ms",
                             "queue_flush_thorough_interval_ms", "get_transfer_count_max",
                             "get_transfer_bytes_max", "index_hash_slot_count", "index_count_max",
                             "index_query_results_max", "file_retention_hours", "clean_interval_ms",
                             "delete_segments_per_pass_max", "range_read_wait_ms",
                             "read_cache_capacity_bytes", "read_cache_prefetch_pending_max",
                             "replication_sync_timeout_ms", "replication_lag_bytes_max")
        check_ratios(self)
        check_non_negative(self, "pool_borrow_timeout_ms", "commit_pages_min", "flush_pages_min",
                            "preallocate_ahead_count", "queue_flush_pages_min")
        check_multiples(self, page_size_bytes=PAGE_SIZE_BYTES)
        check_name_and_property_sizes(self)
        check_record_fits(self, record_fixed_bytes_max=RECORD_FIXED_BYTES_MAX)
        DelayLevels.parse(self.message_delay_levels)
        parse_host(self.store_host, setting="store_host")
        check_race(self)
        check_role(self)

    @property
    def flush_sync(self) -> bool:
        return self.flush_mode is FlushMode.SYNC

    @property
    def effective_preallocate_method(self) -> PreallocateMethod:
        """AUTO resolved: with the pool on, the put path writes into pool buffers, never
        through the file mapping, so populating the mapping only costs CPU beside the hot
        thread; under async flush nothing gains from it either, so blocks are only reserved
        (FALLOCATE).  Under sync flush, the cheaper fsync of written blocks keeps POPULATE."""
        if self.preallocate_method is not PreallocateMethod.AUTO:
            return self.preallocate_method
        if self.pool_enabled and not self.flush_sync:
            return PreallocateMethod.FALLOCATE
        return PreallocateMethod.POPULATE

    @classmethod
    def for_small_segments(cls, segment_size_bytes: int, **overrides: object) -> StoreConfig:
        """A config whose size maxima are scaled down to fit `segment_size_bytes` (tests,
        laptops): body ≤ 1/4 segment, batch ≤ 1/2 segment, unless overridden."""
        fields: dict[str, object] = {
            "segment_size_bytes": segment_size_bytes,
            "message_body_size_bytes_max": segment_size_bytes // 4,
            "properties_size_bytes_max": min(32767, segment_size_bytes // 16),
            "put_batch_size_bytes_max": segment_size_bytes // 2,
            "consume_queue_file_size_bytes": 20 * 1024,
            "index_hash_slot_count": 1024,
            "index_count_max": 4096,
        }
        fields.update(overrides)
        return cls(**fields)  # type: ignore[arg-type]


RECORD_FIXED_BYTES_MAX = 91 + 12 + 12 + 1
"""The largest fixed part of a record: v1 IPv4 is 91 bytes; +12 per IPv6 host; +1 for v2."""
