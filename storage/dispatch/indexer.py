"""`Indexer`: dispatch (reput) in its own process, reading a directory another process writes.

    <directory>/positions          the writer's published watermarks (read here)
    <directory>/dispatched         what this indexer has synced (written here; the writer
                                   takes queue offsets from the consume queues below it)
    <directory>/indexer.lock       one indexer per directory
    <directory>/indexer.abort      present while open (unclean if found at open)
    <directory>/indexer-checkpoint consume queue and index times (RocketMQ checkpoint layout)
    <directory>/consumequeue/, index/   built here, from the commit log up to `committed`

Open: lock → load consume queues and index → cut a torn last entry of any queue (a kill -9
can land inside the 20-byte copy) → resume where the queues and the index end.

Run: the dispatch thread polls `positions` before every pass and dispatches up to the
published committed position, which never covers a partly copied record.  A new writer
generation whose recovery ended below what was dispatched (only a machine crash loses
committed bytes) cuts the consume queues back to that end and re-dispatches from it.  The
writer's retention moves `min_position`; the queues and the index drop what lies below it.

Crash-only: anything unexpected (a record that fails to decode below `committed`) stops the
indexer; the next start recovers from the files, and re-dispatching is idempotent.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from ..config import StoreConfig
from ..errors import StoreFormatError
from ..files.checkpoint import Checkpoint
from ..files.lockfile import AbortMarker, StoreLock
from ..files.watermarks import DispatchedFile, PositionsFile
from ..index.index_service import IndexService
from ..log.commitlog_reader import CommitLogReader
from ..log.publisher import POSITIONS_FILE
from ..queues.consume_queues import ConsumeQueues
from ..recovery.startup import COMMITLOG_DIRECTORY, DISPATCHED_FILE, INDEX_DIRECTORY
from ..service_thread import ServiceThread
from .dispatcher import Dispatcher, DispatchService, Listener
from .indexer_repair import cut_torn_queue_tails

log = logging.getLogger(__name__)


class Indexer:
    """Use `Indexer.open(directory, config, listener=...)`; `close()` when done."""

    def __init__(self, directory: Path, config: StoreConfig, *,
                 listener: Listener | None) -> None:
        self.directory = directory
        self.config = config
        self.failure: str | None = None
        directory.mkdir(parents=True, exist_ok=True)  # it may start before the writer
        self._lock = StoreLock(directory / "indexer.lock")
        self._lock.acquire()
        self._closers: list[Callable[[], None]] = []
        try:
            self._open(listener)
        except BaseException:
            self._close_files()
            raise

    def _open(self, listener: Listener | None) -> None:
        directory, config = self.directory, self.config
        (directory / COMMITLOG_DIRECTORY).mkdir(parents=True, exist_ok=True)
        self._abort = AbortMarker(directory / "indexer.abort")
        self._checkpoint = Checkpoint(directory / "indexer-checkpoint")
        self._closers.append(self._checkpoint.close)
        self.queues = ConsumeQueues(directory,
                                    file_size_bytes=config.consume_queue_file_size_bytes)
        self._closers.append(self.queues.close)
        self.queues.load()
        self.index: IndexService | None = None
        if config.index_enabled:
            self.index = IndexService(directory=directory / INDEX_DIRECTORY,
                                      hash_slot_count=config.index_hash_slot_count,
                                      index_count_max=config.index_count_max,
                                      query_results_max=config.index_query_results_max)
            self._closers.append(self.index.close)
            self.index.load(abnormal=self._abort.present,
                            index_timestamp_ms=self._checkpoint.values.index_msg_timestamp_ms)
        self.reader = CommitLogReader(directory / COMMITLOG_DIRECTORY,
                                      segment_size_bytes=config.segment_size_bytes)
        self._closers.append(self.reader.close)
        cut = cut_torn_queue_tails(self.queues, self.reader)
        if cut:
            log.warning("cut a torn last entry in %d consume queues", cut)
        dispatched_position = self.queues.max_physical_end
        if self.index is not None:
            dispatched_position = min(dispatched_position, self.index.end_physical_offset)
        self.dispatcher = Dispatcher(self.reader, self.queues, index=self.index,
                                     dispatched_position=dispatched_position,
                                     records_per_pass_max=config.dispatch_records_per_pass_max)
        self._dispatched = DispatchedFile(directory / DISPATCHED_FILE, writable=True)
        self._closers.append(self._dispatched.close)
        previous = self._dispatched.read()
        self.writer_generation = previous[1]["writer_generation"] if previous else 0
        self.synced_position = (min(previous[1]["synced_position"], dispatched_position)
                                if previous else 0)
        self._positions: PositionsFile | None = None
        self.positions_problem: str | None = None
        """Why the writer's `positions` cannot be read (dispatch waits meanwhile), or None."""
        self.published: dict[str, int] | None = None
        self.min_position = 0
        self._dispatch = DispatchService(self.dispatcher, config,
                                         committed_position=self._committed_position,
                                         min_position=lambda: self.min_position,
                                         listener=listener, on_fatal=self._on_fatal)
        self._sync = _SyncService(self)
        self._abort.create()
        self._dispatch.start()
        self._sync.start()

    @classmethod
    def open(cls, directory: str | Path, config: StoreConfig | None = None, *,
             listener: Listener | None = None) -> Indexer:
        return cls(Path(directory), config or StoreConfig(), listener=listener)

    # -- the writer's positions (dispatch thread) -----------------------------------------
    def _committed_position(self) -> int:
        published = self._poll_positions()
        if published is None:
            return self.dispatcher.dispatched_position  # no writer yet: nothing to read
        if published["generation"] != self.writer_generation:
            self._on_new_generation(published)
        if published["min_position"] > self.min_position:
            self._on_min_position(published["min_position"])
        return max(published["committed_position"], self.dispatcher.dispatched_position)

    def _poll_positions(self) -> dict[str, int] | None:
        try:
            if self._positions is None:
                self._positions = PositionsFile(self.directory / POSITIONS_FILE,
                                                writable=False)
            found = self._positions.read()
        except FileNotFoundError:
            return None  # no writer has opened the directory yet
        except StoreFormatError as error:
            if self.positions_problem is None:
                log.error("cannot read the writer's positions; dispatch waits: %s", error)
            self.positions_problem = str(error)
            return None
        self.positions_problem = None
        self.published = found[1] if found is not None else None
        return self.published

    def _on_new_generation(self, published: dict[str, int]) -> None:
        end = published["recovered_end_position"]
        if self.index is not None and self.index.cut_back(end):
            log.warning("writer generation %d recovered the log to %d: deleted index files "
                        "past it", published["generation"], end)
        if self.dispatcher.dispatched_position > end:
            removed = self.queues.truncate_to_physical(end)
            log.warning("writer generation %d recovered the log to %d, below dispatch at %d: "
                        "cut %d consume queue entries, re-dispatching", published["generation"],
                        end, self.dispatcher.dispatched_position, removed)
            self.dispatcher.dispatched_position = end
            self.synced_position = min(self.synced_position, end)
        self.writer_generation = published["generation"]

    def _on_min_position(self, minimum: int) -> None:
        self.min_position = minimum
        self.queues.delete_before_physical(minimum)
        if self.index is not None:
            self.index.delete_before(minimum)
        self.reader.forget_before(minimum)

    # -- syncing and publishing `dispatched` (sync thread) ---------------------------------
    def sync(self, *, thorough: bool) -> None:
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
        self._dispatched.publish(synced_position=self.synced_position,
                                 dispatched_position=self.dispatcher.dispatched_position,
                                 writer_generation=self.writer_generation,
                                 published_ms=time.time_ns() // 1_000_000,
                                 indexer_pid=os.getpid())

    # -- state -------------------------------------------------------------------------
    @property
    def dispatched_position(self) -> int:
        return self.dispatcher.dispatched_position

    @property
    def dispatch_behind_bytes(self) -> int:
        published = self.published
        if published is None:
            return 0
        return max(0, published["committed_position"] - self.dispatcher.dispatched_position)

    def _on_fatal(self, service: str, error: BaseException) -> None:
        self.failure = f"{service} failed: {error!r}"
        log.error("indexer stopped: %s", self.failure)

    def close(self) -> None:
        """Dispatch what is readable, sync, publish, and remove the abort marker if clean."""
        for service in (self._dispatch, self._sync):
            service.stop()
        clean = self.failure is None
        self._close_files()
        if clean:
            self._abort.remove()

    def _close_files(self) -> None:
        for close in reversed(self._closers):
            close()
        self._closers.clear()
        if self._positions is not None:
            self._positions.close()
            self._positions = None
        self._lock.release()

    def __enter__(self) -> Indexer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


class _SyncService(ServiceThread):
    """Flushes consume queues every `queue_flush_interval_ms` (thoroughly every
    `queue_flush_thorough_interval_ms`) and publishes `dispatched` after each pass."""

    name = "indexer-sync"

    def __init__(self, indexer: Indexer) -> None:
        super().__init__(on_fatal=indexer._on_fatal)
        self._indexer = indexer
        self._last_thorough_s = time.monotonic()

    def run_once(self) -> None:
        config = self._indexer.config
        self.wait_for_running(config.queue_flush_interval_ms)
        now_s = time.monotonic()
        elapsed_ms = (now_s - self._last_thorough_s) * 1000
        thorough = elapsed_ms >= config.queue_flush_thorough_interval_ms
        self._indexer.sync(thorough=thorough)
        if thorough:
            self._last_thorough_s = now_s

    def shutdown_drain(self) -> None:
        self._indexer.sync(thorough=True)
