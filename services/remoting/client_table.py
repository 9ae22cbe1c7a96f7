"""`ClientTable`: who is connected, which groups they consume in, and who locks which queue.

RocketMQ's clients rebalance on their own side: each asks GET_CONSUMER_LIST_BY_GROUP and
takes its share of the sorted queues.  So the list must hold every live client of the group,
the caller included, and no dead one: a client is live while it heartbeats (every 30 s)
within `consumer_expiry_ms`, and leaves with UNREGISTER_CLIENT or when its connection
closes.  Push consumers send their subscriptions only in heartbeats, so pulls take the
subscription from here (RocketMQ's `ConsumerManager`).  Orderly consumers lock queues
(LOCK_BATCH_MQ): a lock is held by one client id until `lock_expiry_ms` passes without
renewal, or the client leaves.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from .bodies import MessageQueue
from .codes import SYSTEM_BUSY, RemotingError


@dataclasses.dataclass
class Subscription:
    topic: str
    expression: str
    expression_type: str
    sub_version: int


@dataclasses.dataclass
class ClientEntry:
    client_id: str
    connection_id: int
    address: str
    language: str
    version: int
    seen_ms: int
    consumer_groups: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Group → its ConsumerData (consumeType, messageModel, consumeFromWhere)."""
    subscriptions: dict[str, dict[str, Subscription]] = dataclasses.field(default_factory=dict)
    """Group → topic → subscription."""
    producer_groups: set[str] = dataclasses.field(default_factory=set)


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ClientTable:
    def __init__(self, *, expiry_ms: int, lock_expiry_ms: int, clients_max: int) -> None:
        self._expiry_ms = expiry_ms
        self._lock_expiry_ms = lock_expiry_ms
        self._clients_max = clients_max
        self._clients: dict[str, ClientEntry] = {}
        self._locks: dict[tuple[str, MessageQueue], tuple[str, int]] = {}
        """(group, queue) → (client id, when locked or renewed, ms)."""

    def heartbeat(self, entry: ClientEntry) -> set[str]:
        """Record a heartbeat; returns the consumer groups whose members changed (this
        client joined or left them, or others expired from them)."""
        changed = self.expire()
        known = self._clients.get(entry.client_id)
        if known is None and len(self._clients) >= self._clients_max:
            raise RemotingError(SYSTEM_BUSY, f"{len(self._clients)} clients are registered "
                                             f"(clients_max)")
        self._clients[entry.client_id] = entry
        before = set(known.consumer_groups) if known is not None else set()
        return changed | (before ^ set(entry.consumer_groups))

    def touch(self, connection_id: int) -> None:
        stamp = now_ms()
        for entry in self._clients.values():
            if entry.connection_id == connection_id:
                entry.seen_ms = stamp

    def unregister(self, client_id: str) -> set[str]:
        """Remove a client; returns the consumer groups it left."""
        return self._remove({client_id})

    def connection_closed(self, connection_id: int) -> set[str]:
        """Remove the clients of a closed connection; returns the groups they left."""
        return self._remove({client_id for client_id, entry in self._clients.items()
                             if entry.connection_id == connection_id})

    def expire(self) -> set[str]:
        """Remove the clients silent for `expiry_ms`; returns the groups they left."""
        deadline = now_ms() - self._expiry_ms
        return self._remove({client_id for client_id, entry in self._clients.items()
                             if entry.seen_ms < deadline})

    def _remove(self, client_ids: set[str]) -> set[str]:
        groups: set[str] = set()
        for client_id in client_ids:
            entry = self._clients.pop(client_id, None)
            if entry is not None:
                groups.update(entry.consumer_groups)
        self._drop_locks(client_ids)
        return groups

    def consumers(self, group: str) -> list[ClientEntry]:
        self.expire()
        return sorted((entry for entry in self._clients.values()
                       if group in entry.consumer_groups), key=lambda entry: entry.client_id)

    def subscription(self, group: str, topic: str) -> Subscription | None:
        found = None
        for entry in self.consumers(group):
            subscription = entry.subscriptions.get(group, {}).get(topic)
            if subscription is not None and (found is None or
                                             subscription.sub_version > found.sub_version):
                found = subscription
        return found

    def groups(self) -> list[str]:
        return sorted({group for entry in self._clients.values()
                       for group in entry.consumer_groups})

    def groups_of(self, topic: str) -> list[str]:
        return sorted({group for entry in self._clients.values()
                       for group, topics in entry.subscriptions.items() if topic in topics})

    def lock(self, group: str, client_id: str, queues: list[MessageQueue]) -> list[MessageQueue]:
        """Lock what no other live client holds; returns the queues this client holds."""
        stamp = now_ms()
        held = []
        for queue in queues:
            owner = self._locks.get((group, queue))
            if owner is None or owner[0] == client_id or stamp - owner[1] > self._lock_expiry_ms:
                self._locks[group, queue] = (client_id, stamp)
                held.append(queue)
        return held

    def unlock(self, group: str, client_id: str, queues: list[MessageQueue]) -> None:
        for queue in queues:
            owner = self._locks.get((group, queue))
            if owner is not None and owner[0] == client_id:
                del self._locks[group, queue]

    def _drop_locks(self, client_ids: set[str]) -> None:
        if client_ids:
            for key in [key for key, owner in self._locks.items() if owner[0] in client_ids]:
                del self._locks[key]
