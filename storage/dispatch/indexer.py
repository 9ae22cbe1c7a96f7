"""`Indexer`: the indexer role, one class for both deployments.

It builds the consume queues and the index from the commit log (dispatch), syncs them and
records how far in a checkpoint, follows the log's start as retention moves it, and cuts
back when the log was cut.  What differs between the deployments is only where it learns
about the log (a `LogSource`) and which files it keeps beside the queues:

| | embedded (`MessageStore`) | its own process (`Indexer.open`, `mqstore indexer`) |
|---|---|---|
| log source | the store's segment list | the writer's `positions` (`PublishedLog`) |
| the log's start moves | retention calls `follow_log_start` | seen in `positions` |
| the log was cut | recovery's end, at open (`cut_back`) | a new writer generation's end |
| checkpoint | the store's `checkpoint` | `indexer-checkpoint` |
| lock, abort marker | the store's `lock`, `abort` | `indexer.lock`, `indexer.abort` |
| `dispatched` | published when positions are | always published |

Lifecycle: construct (loads the queues and the index; after an abnormal exit, index files
newer than the checkpoint's index time are dropped) → `cut_back` (embedded: to recovery's
end) → `resume` → `start` (catches up, then runs the dispatch and queue-sync threads) →
`stop` (dispatch catches up, a thorough sync) → `close`.

The resume rule (`resume`): a kill -9 may have torn the last entry of a queue, so each
queue's last entry is checked against the log first (`torn_tail.py`).  Dispatch then resumes
at the end of the newest record any queue holds, lowered to the newest record the index
holds (it may have lost files), raised to the log's start, and lowered to `floor_position`
when given (the embedded store's recovery window after an abnormal exit).  The index
header's end offset (RocketMQ `endPhyOffset`) is where that record *starts*, so it is
dispatched again: idempotent, as the queues and the index skip what they hold, and that
record gets only keys it lacks (none when `index_tags` matches the store's writer).

Crash-only: a record that fails to decode below the committed position stops the indexer
(`failure`); the next open recovers from the files.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from ..config import StoreConfig
from ..files.checkpoint import Checkpoint
from ..files.doorbell import DoorbellReceiver
from ..files.io import make_directories_durably
from ..files.lockfile import AbortMarker, StoreLock
from ..files.queue_offsets_file import read_queue_offsets
from ..files.watermarks import DispatchedFile
from ..format import volume
from ..format.delay_levels import DelayLevels
from ..format.record_scan import Damage
from ..index.index_service import IndexService
from ..log.reader import CommitLogReader
from ..queues.consume_queues import ConsumeQueues
from ..service_thread import FatalHandler, ServiceThread
from ..store_sizes import embedded_config
from .dispatch_service import DispatchService
from .dispatcher import Dispatcher, Listener
from .log_source import LogSource
from .published_log import PublishedLog
from .queue_sync import QueueSyncService
from .stalled_queue import StalledQueue
from .tag_evidence import index_tags_for_store
from .torn_tail import cut_torn_queue_tails

log = logging.getLogger(__name__)


class Indexer:
    """See the module docstring.  `Indexer.open` runs one in its own process; the embedded
    store constructs one with its own log source and checkpoint."""

    def __init__(self, directory: Path, config: StoreConfig, *, source: LogSource,
                 checkpoint: Checkpoint, abnormal: bool, publish_dispatched: bool,
                 writer_generation: int | None = None) -> None:
        self.directory = directory
        self.config = config
        self._source = source
        self._checkpoint = checkpoint
        self.failure: str | None = None
        self._on_fatal_outer: FatalHandler | None = None
        self._closers: list[Callable[[], None]] = []
        self._services: list[ServiceThread] = []
        self.reader = CommitLogReader(directory / volume.COMMITLOG_DIRECTORY,
                                      segment_size_bytes=config.segment_size_bytes)
        self._closers.append(self.reader.close)
        try:
            self.queues = ConsumeQueues(
                directory, file_size_bytes=config.consume_queue_file_size_bytes,
                allocate_step_bytes=config.consume_queue_allocate_step_bytes)
            self._closers.append(self.queues.close)
            self._cut_queues = self.queues.load()
            # Asked before `load` drops index files an abnormal exit left: they are evidence.
            self.index_tags = config.index_enabled and index_tags_for_store(
                directory, config, reader=self.reader)  # tag_evidence.py
            self.index = self._load_index(abnormal=abnormal)
            self._dispatched = (DispatchedFile(directory / volume.DISPATCHED_FILE,
                                               writable=True) if publish_dispatched else None)
            previous = self._dispatched.read() if self._dispatched is not None else None
        except BaseException:
            self._close_files()
            raise
        if self._dispatched is not None:
            self._closers.append(self._dispatched.close)
        self._previous_synced = previous[1]["synced_position"] if previous else 0
        self.writer_generation = (writer_generation if writer_generation is not None
                                  else previous[1]["writer_generation"] if previous else 0)
        """The writer generation whose log the queues follow (published in `dispatched`)."""
        self.synced_position = 0
        """Every record below it has its queue entries synced (published in `dispatched`)."""
        self.min_position = 0
        """The log's start as last seen: the queues and the index hold nothing below it."""
        self.dispatcher = Dispatcher(self.reader, self.queues, index=self.index,
                                     dispatched_position=0,
                                     records_per_pass_max=config.dispatch_records_per_pass_max,
                                     index_tags=self.index_tags,
                                     delay_levels=DelayLevels.parse(config.message_delay_levels))
        self._dispatch: DispatchService | None = None
        self._own: _OwnFiles | None = None
        """`Indexer.open`'s: the process's abort marker and what closes with it."""

    def _load_index(self, *, abnormal: bool) -> IndexService | None:
        config = self.config
        if not config.index_enabled:
            return None
        index = IndexService(directory=self.directory / volume.INDEX_DIRECTORY,
                             hash_slot_count=config.index_hash_slot_count,
                             index_count_max=config.index_count_max,
                             query_results_max=config.index_query_results_max)
        self._closers.append(index.close)
        dropped = index.load(abnormal=abnormal,
                             index_timestamp_ms=self._checkpoint.values.index_msg_timestamp_ms)
        if dropped:
            log.warning("dropped %d index files newer than the checkpoint; re-dispatching",
                        len(dropped))
        return index

    # -- open ----------------------------------------------------------------------------------
    @classmethod
    def open(cls, directory: str | Path, config: StoreConfig | None = None, *,
             listener: Listener | None = None) -> Indexer:
        """The indexer in a process of its own, beside a writer that publishes `positions`
        (it may start before the writer): its own lock, abort marker and checkpoint."""
        directory = Path(directory)
        make_directories_durably(directory / volume.COMMITLOG_DIRECTORY)
        lock = StoreLock(directory / volume.INDEXER_LOCK_FILE, holder_role="indexer",
                         lock_name="indexer lock")
        lock.acquire()
        closers: list[Callable[[], None]] = [lock.release]
        try:
            abort = AbortMarker(directory / volume.INDEXER_ABORT_FILE)
            checkpoint = Checkpoint(directory / volume.INDEXER_CHECKPOINT_FILE)
            closers.append(checkpoint.close)
            source = PublishedLog(directory)
            closers.append(source.close)
            indexer = cls(directory, config or embedded_config(Path(directory)), source=source,
                          checkpoint=checkpoint, abnormal=abort.present, publish_dispatched=True)
        except BaseException:
            for close in reversed(closers):
                close()
            raise
        indexer._own = _OwnFiles(abort=abort, closers=closers)
        indexer.resume()
        abort.create()
        doorbell = DoorbellReceiver.open(directory)
        if doorbell is not None:
            closers.append(doorbell.close)  # after the dispatch thread stopped (close)
        indexer.start(listener=listener, on_fatal=None, catch_up=False, doorbell=doorbell)
        return indexer

    def cut_back(self, end_position: int) -> None:
        """The commit log now ends at `end_position` (recovery cut it): drop queue entries and
        index files past it, and dispatch again from there what is written anew."""
        if self.index is not None and self.index.cut_back(end_position):
            log.warning("deleted index files past the log's end %d", end_position)
        removed = self.queues.truncate_to_physical(end_position)
        if removed:
            log.warning("cut %d consume queue entries past the log's end %d", removed,
                        end_position)
        self.dispatcher.dispatched_position = min(self.dispatcher.dispatched_position,
                                                  end_position)
        self.synced_position = min(self.synced_position, end_position)

    def resume(self, *, floor_position: int | None = None) -> int:
        """Decide where dispatch resumes (the module docstring's rule); returns it."""
        cut = cut_torn_queue_tails(self.queues, self.reader)
        if cut:
            log.warning("cut a torn last entry in %d consume queues", cut)
        bounds = self._source.bounds()
        self.min_position = bounds.min_position if bounds is not None else 0
        if self.min_position > 0:  # queues start at the log's start (RocketMQ correctMinOffset)
            self.follow_log_start(self.min_position)
        position = max(self.queues.max_physical_end, self.min_position)
        for physical_end in self._queues_behind():  # dispatch fills them again
            position = min(position, max(physical_end, self.min_position))
        if self.index is not None:
            position = min(position, max(self.index.end_physical_offset, self.min_position))
        if floor_position is not None:
            position = max(min(position, floor_position), self.min_position)
        self.dispatcher.dispatched_position = position
        self.synced_position = min(self._previous_synced, position)
        return position

    def _queues_behind(self) -> list[int]:
        """Where each queue that lost entries ends: queues cut at load, and queues behind
        the writer's queue offset snapshot (a deleted or damaged queue directory: its lost
        records lie after its end; a queue missing altogether, anywhere in the log)."""
        behind = [queue.max_physical_end for queue in self._cut_queues]
        snapshot = read_queue_offsets(self.directory)
        if snapshot is not None:
            for (topic, queue_id), next_offset in snapshot.offsets.items():
                queue = self.queues.get(topic, queue_id)
                if queue is None or queue.max_offset < next_offset:
                    log.warning("consume queue %s/%d ends at offset %d, the writer counted %d: "
                                "dispatching its records again", topic, queue_id,
                                queue.max_offset if queue else 0, next_offset)
                    behind.append(queue.max_physical_end if queue is not None else 0)
        return behind

    def start(self, *, listener: Listener | None, on_fatal: FatalHandler | None,
              catch_up: bool, doorbell: DoorbellReceiver | None = None) -> None:
        """Start dispatching (after catching up, if asked: RocketMQ's start() waits for
        reput, so reads after open see every recovered message) and syncing.  `doorbell`:
        the dispatch thread waits on the writer's rings (an indexer process)."""
        assert self._dispatch is None, "started twice"
        self._on_fatal_outer = on_fatal
        self._dispatch = DispatchService(self.dispatcher, self.config,
                                         committed_position=self._committed_position,
                                         min_position=lambda: self.min_position,
                                         listener=listener, on_fatal=self._on_fatal)
        if doorbell is not None:
            self._dispatch.wait_on(doorbell,
                                   idle_wait_ms=self.config.dispatch_doorbell_poll_ms)
        if catch_up:
            self._dispatch.catch_up()
        self._services = [self._dispatch, QueueSyncService(self)]
        for service in self._services:
            service.start()

    # -- the log (dispatch thread) -----------------------------------------------------------
    def _committed_position(self) -> int:
        """Read the source before a pass; act on a new writer generation or a new start."""
        bounds = self._source.bounds()
        if bounds is None:
            return self.dispatcher.dispatched_position  # no writer yet: nothing to read
        if bounds.generation is not None and bounds.generation != self.writer_generation:
            if self.dispatcher.dispatched_position > bounds.recovered_end_position:
                log.warning("writer generation %d recovered the log to %d, below dispatch "
                            "at %d: re-dispatching from there", bounds.generation,
                            bounds.recovered_end_position, self.dispatcher.dispatched_position)
                self.dispatcher.note_damage(Damage(
                    bounds.recovered_end_position, self.dispatcher.dispatched_position,
                    "the writer's recovery cut the log here"))
            self.cut_back(bounds.recovered_end_position)
            self.writer_generation = bounds.generation
        if bounds.min_position > self.min_position:
            self.follow_log_start(bounds.min_position)
        return bounds.committed_position

    def follow_generation(self, generation: int) -> None:
        """The embedded store's writer generation (its positions publisher's), published in
        `dispatched` so read-only views know the queues follow that writer's log."""
        self.writer_generation = generation

    def follow_log_start(self, min_position: int) -> None:
        """Retention moved the log's start: drop what the queues and the index hold below it
        (RocketMQ `CleanConsumeQueueService`)."""
        self.min_position = max(self.min_position, min_position)
        self.queues.delete_before_physical(self.min_position)
        if self.index is not None:
            self.index.delete_before(self.min_position)
        self.reader.forget_before(self.min_position)

    def wake_dispatch(self) -> None:
        if self._dispatch is not None:
            self._dispatch.wakeup()

    # -- syncing (queue-sync thread) ------------------------------------------------------------
    def sync(self, *, thorough: bool) -> None:
        """Sync the queue files with enough dirty pages (every file when `thorough`, and the
        index, then the checkpoint's queue and index times); publish `dispatched`.  What is
        recorded was captured before the sync, so it never claims more than is on disk."""
        position = self.dispatcher.dispatched_position
        covered_ms = self.dispatcher.last_store_timestamp_ms
        self.queues.flush(pages_min=0 if thorough else self.config.queue_flush_pages_min)
        if thorough:
            if self.index is not None:
                self.index.flush()
            if covered_ms:
                self._checkpoint.values.logics_msg_timestamp_ms = covered_ms
                self._checkpoint.values.index_msg_timestamp_ms = covered_ms
            self._checkpoint.write()
            self.synced_position = position
        if self._dispatched is not None:
            self._dispatched.publish(synced_position=self.synced_position,
                                     dispatched_position=self.dispatcher.dispatched_position,
                                     writer_generation=self.writer_generation,
                                     published_ms=time.time_ns() // 1_000_000,
                                     indexer_pid=os.getpid())

    # -- state ---------------------------------------------------------------------------------
    @property
    def dispatched_position(self) -> int:
        return self.dispatcher.dispatched_position

    @property
    def queue_time_unrecorded(self) -> bool:
        """Dispatch covered a record, but the checkpoint holds no queue time yet."""
        return (self._checkpoint.values.logics_msg_timestamp_ms == 0
                and self.dispatcher.last_store_timestamp_ms > 0)

    @property
    def dispatch_behind_bytes(self) -> int:
        """Committed log bytes not yet in the consume queues and the index."""
        bounds = self._source.bounds()
        if bounds is None:
            return 0
        return max(0, bounds.committed_position - self.dispatcher.dispatched_position)

    @property
    def stalled_reason(self) -> str | None:
        """Why dispatch is waiting (a full disk), or None."""
        return self._dispatch.stalled_reason if self._dispatch is not None else None

    @property
    def stalled_queues(self) -> list[StalledQueue]:
        """The queues an error of their own files stalled (dispatcher.py), oldest first."""
        return list(self.dispatcher.stalled_queues.values())

    def _on_fatal(self, service: str, error: BaseException) -> None:
        self.failure = f"{service} failed: {error!r}"
        log.error("indexer stopped: %s", self.failure)
        if self._on_fatal_outer is not None:
            self._on_fatal_outer(service, error)

    @property
    def published(self) -> dict[str, int] | None:
        """The writer's last published positions (an indexer process's), or None."""
        return self._source.published if isinstance(self._source, PublishedLog) else None

    @property
    def positions_problem(self) -> str | None:
        """Why the writer's `positions` cannot be read (dispatch waits meanwhile), or None."""
        return self._source.problem if isinstance(self._source, PublishedLog) else None

    # -- stop -----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Dispatch what is committed, then a thorough sync (and a last `dispatched`)."""
        services, self._services = self._services, []
        for service in services:
            service.stop()

    def close(self) -> None:
        """Stop, close the files; an indexer process also removes its abort marker if it
        stopped cleanly, and releases its lock."""
        self.stop()
        self._close_files()
        own, self._own = self._own, None
        if own is not None:
            if self.failure is None:
                own.abort.remove()
            for close in reversed(own.closers):
                close()

    def _close_files(self) -> None:
        for close in reversed(self._closers):
            close()
        self._closers.clear()

    def __enter__(self) -> Indexer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


class _OwnFiles(NamedTuple):
    abort: AbortMarker
    closers: list[Callable[[], None]]
