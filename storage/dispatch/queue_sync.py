"""`QueueSyncService`: the indexer's thread that syncs the consume queues and the index."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from ..service_thread import ServiceThread

if TYPE_CHECKING:
    from .indexer import Indexer


class QueueSyncService(ServiceThread):
    """RocketMQ `FlushConsumeQueueService`: `Indexer.sync` every `queue_flush_interval_ms`,
    thoroughly every `queue_flush_thorough_interval_ms`, and thoroughly when stopping.  The
    first pass is thorough too, and so is every pass while the checkpoint has no queue time
    yet but dispatch has covered a record: a fresh store's checkpoint, or one a crash left,
    gets its queue and index times within `queue_flush_interval_ms`, not after the thorough
    interval (recovery after a crash starts from those times)."""

    name = "queue-sync"

    def __init__(self, indexer: Indexer) -> None:
        super().__init__(on_fatal=indexer._on_fatal)
        self._indexer = indexer
        self._last_thorough_s = -math.inf

    def run_once(self) -> None:
        config = self._indexer.config
        self.wait_for_running(config.queue_flush_interval_ms)
        now_s = time.monotonic()
        thorough = (now_s - self._last_thorough_s) * 1000 >= \
            config.queue_flush_thorough_interval_ms or self._indexer.queue_time_unrecorded
        self._indexer.sync(thorough=thorough)
        if thorough:
            self._last_thorough_s = now_s

    def shutdown_drain(self) -> None:
        self._indexer.sync(thorough=True)
