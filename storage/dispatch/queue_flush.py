"""The consume queue flush service (RocketMQ `FlushConsumeQueueService`).

Every `queue_flush_interval_ms` it syncs consume queue files with at least
`queue_flush_pages_min` dirty pages; every `queue_flush_thorough_interval_ms` it syncs all of
them and then persists the checkpoint's queue time, captured *before* the sync, so the
checkpoint never claims more than is on disk.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..config import StoreConfig
from ..queues.consume_queues import ConsumeQueues
from ..service_thread import FatalHandler, ServiceThread

OnThoroughFlush = Callable[[int], None]
"""Called with the dispatch store time that the finished thorough sync covers."""


class QueueFlushService(ServiceThread):
    name = "queue-flush"

    def __init__(self, queues: ConsumeQueues, config: StoreConfig, *,
                 dispatched_store_timestamp_ms: Callable[[], int],
                 on_thorough_flush: OnThoroughFlush, on_fatal: FatalHandler) -> None:
        super().__init__(on_fatal=on_fatal)
        self._queues = queues
        self._config = config
        self._dispatched_store_timestamp_ms = dispatched_store_timestamp_ms
        self._on_thorough_flush = on_thorough_flush
        self._last_thorough_s = time.monotonic()

    def run_once(self) -> None:
        self.wait_for_running(self._config.queue_flush_interval_ms)
        now_s = time.monotonic()
        thorough = (now_s - self._last_thorough_s) * 1000 >= \
            self._config.queue_flush_thorough_interval_ms
        self.flush(thorough=thorough)
        if thorough:
            self._last_thorough_s = now_s

    def flush(self, *, thorough: bool) -> None:
        covered_ms = self._dispatched_store_timestamp_ms()
        self._queues.flush(pages_min=0 if thorough else self._config.queue_flush_pages_min)
        if thorough:
            self._on_thorough_flush(covered_ms)

    def shutdown_drain(self) -> None:
        self.flush(thorough=True)
