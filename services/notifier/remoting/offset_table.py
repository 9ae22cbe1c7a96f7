"""`OffsetTable`: consumer offsets committed through the remoting front, on the one offset
store every front and process shares (`config/consumer-offsets/`, storage's
`ConsumerOffsets`).

RocketMQ's clients commit every queue's offset every 5 s (UPDATE_CONSUMER_OFFSET, oneway,
one request per queue) and piggy-back it on pulls.  A commit is held here only until the next
write, every `offsets_flush_interval_ms` and at stop, on a worker thread: the table keeps
*pending* commits, never a copy of the store.  Reads are the store's file (cached by its
inode, time and size, so a change made over HTTP, by `mqstore admin` or by another replica is
seen at once) with the pending commits over it.

A commit sets the offset, as RocketMQ's broker does (it may move back: a consumer seeking),
unless the store moved the queue back after the commit was taken (a reset elsewhere): then the
reset wins (`ConsumerOffsets.commit`'s `seen`).

Bounds: a commit for a group name the store refuses, or for a new group once the store holds
`groups_max`, is refused at once (`OffsetCommitError`: the handler answers an error code with
the reason), never accepted and then dropped; at most `pending_queues_max` queues wait for a
write (past it a commit is refused until the next write).
"""

from __future__ import annotations

import asyncio
import logging

from mqstore.storage import StoreError
from mqstore.storage.files.consumer_offsets import (
    ConsumerOffsets,
    GroupNameError,
    OffsetsLockTimeoutError,
    validate_group,
)
from mqstore.storage.format.topic import validate_topic

log = logging.getLogger("mqstore.remoting")

GroupTopic = tuple[str, str]
TOPIC_SIZE_BYTES_MAX = 255
PENDING_QUEUES_MAX = 100_000
"""Queues whose commit waits for the next write: 10,000 clients of 10 queues each, every
second (RocketMQ's clients commit each queue every 5 s); ~100 B each in memory."""


class OffsetCommitError(StoreError):
    """A commit the store cannot take (a bad group or topic, too many groups or pending
    commits); nothing was recorded."""


class OffsetTable:
    def __init__(self, offsets: ConsumerOffsets, *,
                 pending_queues_max: int = PENDING_QUEUES_MAX) -> None:
        self._files = offsets
        self.pending_queues_max = pending_queues_max
        self._pending: dict[GroupTopic, dict[int, tuple[int, int | None]]] = {}
        """(group, topic) → {queue id: (offset, the stored offset when it was committed)}."""
        self._pending_count = 0
        self._pending_groups: set[str] = set()

    def fetch(self, group: str, topic: str) -> dict[int, int]:
        """Every committed offset of the group on the topic: the store's, pending over it."""
        offsets = self._stored(group, topic)
        for queue_id, (offset, _) in self._pending.get((group, topic), {}).items():
            offsets[queue_id] = offset
        return offsets

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        pending = self._pending.get((group, topic), {}).get(queue_id)
        if pending is not None:
            return pending[0]
        return self._stored(group, topic).get(queue_id)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record a commit for the next write; `OffsetCommitError` if it cannot be taken."""
        try:
            validate_group(group)
            validate_topic(topic, size_bytes_max=TOPIC_SIZE_BYTES_MAX)
        except (GroupNameError, StoreError) as error:
            raise OffsetCommitError(str(error)) from None
        key = (group, topic)
        queues = self._pending.get(key)
        if queues is None or queue_id not in queues:
            if self._pending_count >= self.pending_queues_max:
                raise OffsetCommitError(f"{self._pending_count} queue offsets wait to be "
                                        f"written already (pending_queues_max); try again")
            self._check_room_for(group)
            self._pending_count += 1
            self._pending_groups.add(group)
        stored = self._stored(group, topic).get(queue_id)
        self._pending.setdefault(key, {})[queue_id] = (offset, stored)

    def groups(self) -> list[str]:
        """Groups with offsets in the store or pending."""
        return sorted(set(self._store_groups()) | {group for group, _ in self._pending})

    def groups_of(self, topic: str) -> list[str]:
        return sorted({group for group, topics in self._store_groups().items()
                       if topic in topics} |
                      {group for group, known in self._pending if known == topic})

    async def flush(self) -> int:
        """Write the pending commits to the store; returns the queues written.  A commit the
        store refuses now (a lost race for the last group) is dropped with one log line, not
        retried forever; a lock held by another writer is retried at the next write."""
        pending, self._pending = self._pending, {}
        self._pending_count = 0
        self._pending_groups = set()
        written = 0
        for (group, topic), queues in pending.items():
            offsets = {queue_id: offset for queue_id, (offset, _) in queues.items()}
            seen = {queue_id: stored for queue_id, (_, stored) in queues.items()}
            try:
                await asyncio.to_thread(self._files.commit, group, topic, offsets, seen=seen)
                written += len(offsets)
            except OffsetsLockTimeoutError as error:
                log.warning("offsets of %s on %s wait for the next write: %s", group, topic,
                            error)
                waiting = self._pending.setdefault((group, topic), {})
                for queue_id, entry in queues.items():
                    if queue_id not in waiting:  # a newer commit came in meanwhile
                        waiting[queue_id] = entry
                        self._pending_count += 1
                self._pending_groups.add(group)
            except (StoreError, ValueError) as error:
                log.warning("offsets of %s on %s not written: %s", group, topic, error)
        return written

    async def flush_loop(self, interval_ms: int) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            await self.flush()

    # -- the store ---------------------------------------------------------------------------
    def _stored(self, group: str, topic: str) -> dict[int, int]:
        try:
            return self._files.fetch(group, topic)
        except (StoreError, ValueError):
            return {}  # a name the store refuses has no offsets; a broken file, none either

    def _store_groups(self) -> dict[str, list[str]]:
        try:
            return self._files.groups()
        except StoreError as error:
            log.warning("cannot list consumer groups: %s", error)
            return {}

    def _check_room_for(self, group: str) -> None:
        """A group new to the store (and to the pending commits) needs room under
        `groups_max`, or its commit would be lost at the write."""
        if group in self._pending_groups:
            return
        if self._files.path(group).exists():
            return
        if self._files.group_count() >= self._files.groups_max:
            raise OffsetCommitError(f"{self._files.groups_max} consumer groups have offsets "
                                    f"already (groups_max): group {group!r} is not created")
