"""`OffsetTable`: consumer offsets committed through the remoting front.

RocketMQ's clients commit every queue's offset every 5 s (UPDATE_CONSUMER_OFFSET, oneway,
one request per queue) and piggy-back it on pulls.  Each commit lands in memory here and is
written to the group files the HTTP API uses (`config/consumer-offsets/`, storage's
`ConsumerOffsets`) every `offsets_flush_interval_ms` and at stop, on a worker thread.  As
RocketMQ's broker does, a commit sets the offset (it may move back: a consumer seeking or a
reset), so the files are written with `reset=True` for the queues that changed.  Reads see
memory first, then the file.
"""

from __future__ import annotations

import asyncio
import logging

from mqstore.storage import StoreError
from mqstore.storage.files.consumer_offsets import ConsumerOffsets

log = logging.getLogger("mqstore.remoting")

GroupTopic = tuple[str, str]


class OffsetTable:
    def __init__(self, offsets: ConsumerOffsets) -> None:
        self._files = offsets
        self._memory: dict[GroupTopic, dict[int, int]] = {}
        self._dirty: dict[GroupTopic, dict[int, int]] = {}

    def fetch(self, group: str, topic: str) -> dict[int, int]:
        """Every committed offset of the group on the topic (memory over the file)."""
        key = (group, topic)
        loaded = self._memory.get(key)
        if loaded is None:
            try:
                loaded = self._files.fetch(group, topic)
            except (StoreError, ValueError):
                loaded = {}
            self._memory[key] = loaded
        return loaded

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        return self.fetch(group, topic).get(queue_id)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.fetch(group, topic)[queue_id] = offset
        self._dirty.setdefault((group, topic), {})[queue_id] = offset

    def groups(self) -> list[str]:
        """Groups with offsets in memory (committed here, or read from their files)."""
        return sorted({group for (group, _), offsets in self._memory.items() if offsets})

    def groups_of(self, topic: str) -> list[str]:
        return sorted({group for (group, known), offsets in self._memory.items()
                       if known == topic and offsets})

    async def flush(self) -> int:
        """Write the changed offsets to the group files; returns the queues written."""
        dirty, self._dirty = self._dirty, {}
        written = 0
        for (group, topic), offsets in dirty.items():
            try:
                await asyncio.to_thread(self._files.commit, group, topic, offsets, reset=True)
                written += len(offsets)
            except (StoreError, ValueError) as error:
                log.error("cannot write offsets of %s on %s: %s", group, topic, error)
                for queue_id, offset in offsets.items():  # keep them for the next pass
                    self._dirty.setdefault((group, topic), {}).setdefault(queue_id, offset)
        return written

    async def flush_loop(self, interval_ms: int) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            await self.flush()
