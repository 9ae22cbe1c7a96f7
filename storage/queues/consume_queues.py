"""Every consume queue of a store: `consumequeue/<topic>/<queue id>/`, created lazily.

RocketMQ keeps `Map<topic, Map<queueId, ConsumeQueue>>` and loads each
`consumequeue/<topic>/<int>` directory at start (non-integer names are skipped).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

from ..format.volume import CONSUME_QUEUE_DIRECTORY, CREATING_DIRECTORY, creating_name
from .consume_queue import ConsumeQueue

log = logging.getLogger(__name__)


class ConsumeQueues:
    def __init__(self, store_directory: Path, *, file_size_bytes: int,
                 allocate_step_bytes: int) -> None:
        self.directory = store_directory / CONSUME_QUEUE_DIRECTORY
        self.file_size_bytes = file_size_bytes
        self.allocate_step_bytes = allocate_step_bytes
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()

    def load(self) -> list[ConsumeQueue]:
        """Load every queue; returns those that were cut (ConsumeQueue.load)."""
        creating = self.directory.parent / CREATING_DIRECTORY
        for leftover in creating.glob(creating_name(CONSUME_QUEUE_DIRECTORY, "*")):
            leftover.unlink()  # a crash while dispatch was preparing a queue file
        cut: list[ConsumeQueue] = []
        if not self.directory.is_dir():
            return cut
        for topic_directory in sorted(self.directory.iterdir()):
            if not topic_directory.is_dir():
                continue
            for queue_directory in sorted(topic_directory.iterdir()):
                if not queue_directory.name.isdigit():
                    log.warning("skipping %s: not a queue id", queue_directory)
                    continue
                queue = self._new(topic_directory.name, int(queue_directory.name))
                if queue.load():
                    cut.append(queue)
        return cut

    def _new(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = ConsumeQueue(self.directory / topic / str(queue_id), topic=topic,
                             queue_id=queue_id, file_size_bytes=self.file_size_bytes,
                             allocate_step_bytes=self.allocate_step_bytes,
                             creating_directory=self.directory.parent / CREATING_DIRECTORY)
        self._queues[topic, queue_id] = queue
        return queue

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            with self._lock:
                queue = self._queues.get((topic, queue_id)) or self._new(topic, queue_id)
        return queue

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self._queues.values()))

    @property
    def max_physical_end(self) -> int:
        """Where dispatch resumes: the end of the newest record any queue indexes."""
        return max((queue.max_physical_end for queue in self), default=0)

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """Each queue's next offset: what the commit log's put path continues from."""
        return {(queue.topic, queue.queue_id): queue.max_offset for queue in self}

    def truncate_to_physical(self, physical_end: int) -> int:
        return sum(queue.truncate_to_physical(physical_end) for queue in self
                   if queue.max_physical_end > physical_end)

    def delete_before_physical(self, physical_min: int) -> int:
        return sum(queue.delete_before_physical(physical_min) for queue in self)

    def flush(self, *, pages_min: int) -> bool:
        moved = False
        for queue in self:
            moved |= queue.flush(pages_min=pages_min)
        return moved

    def close(self) -> None:
        for queue in self:
            queue.close()
        self._queues.clear()
