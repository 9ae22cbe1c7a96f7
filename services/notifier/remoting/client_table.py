"""`ClientTable`: who is connected, which groups they consume in, and who locks which queue.

RocketMQ's clients rebalance on their own side: each asks GET_CONSUMER_LIST_BY_GROUP and
takes its share of the sorted queues.  So the list must hold every live client of the group,
the caller included, and no dead one: a client is live while it heartbeats (every 30 s)
within `consumer_expiry_ms`, and leaves with UNREGISTER_CLIENT or when its connection
closes.  Push consumers send their subscriptions only in heartbeats, so pulls take the
subscription from here (RocketMQ's `ConsumerManager`).  Orderly consumers lock queues
(LOCK_BATCH_MQ): a lock is held by one client id until `lock_expiry_ms` passes without
renewal, or the client leaves.

Work is proportional to what changed, never to the table: clients are kept in the order
they were last heard from (expiry pops from the front), and indexed by group, by connection
and by the locks they hold.  A full table (`clients_max`) refuses only a client it does not
know, and one connection registers at most `clients_per_connection_max` client ids, so a
flood on one connection cannot fill the table and lock legitimate consumers out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any, TypeVar

from mqstore.services.notifier.remoting.bodies import MessageQueue
from mqstore.services.notifier.remoting.codes import SYSTEM_BUSY, RemotingError

LockKey = tuple[str, MessageQueue]
"""(consumer group, queue)."""
Key = TypeVar("Key")
Value = TypeVar("Value")


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


class NoticeSchedule:
    """When each group was last told NOTIFY_CONSUMER_IDS_CHANGED, and which groups wait for
    the end of their window to be told (clients.py `notify_group_changed` drives it).

    Only groups told within the last window are remembered (kept in the order they were
    told, so forgetting pops from the front): memory is the groups changed per window."""

    def __init__(self) -> None:
        self._told_ms: dict[str, int] = {}
        self._waiting: dict[str, asyncio.TimerHandle | None] = {}

    def delay_ms(self, group: str, *, now: int, window_ms: int) -> int | None:
        """0: tell `group` now; more: tell it after this many ms (it now waits, the caller
        schedules it and calls `scheduled`); None: it already waits (coalesced)."""
        assert window_ms > 0
        while self._told_ms:
            first = next(iter(self._told_ms))
            if self._told_ms[first] > now - window_ms:
                break
            del self._told_ms[first]
        if group in self._waiting:
            return None
        told = self._told_ms.get(group)
        if told is None:
            return 0
        self._waiting[group] = None
        return told + window_ms - now

    def scheduled(self, group: str, handle: asyncio.TimerHandle) -> None:
        assert group in self._waiting
        self._waiting[group] = handle

    def told(self, group: str, *, now: int) -> None:
        self._waiting.pop(group, None)
        self._told_ms.pop(group, None)
        self._told_ms[group] = now  # last in the order told

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def cancel(self) -> None:
        """Drop every notice not yet told (the front stops)."""
        for handle in self._waiting.values():
            if handle is not None:
                handle.cancel()
        self._waiting.clear()


class ClientTable:
    def __init__(self, *, expiry_ms: int, lock_expiry_ms: int, clients_max: int) -> None:
        self._expiry_ms = expiry_ms
        self._lock_expiry_ms = lock_expiry_ms
        self._clients_max = clients_max
        self._clients: dict[str, ClientEntry] = {}
        """Client id → entry, in the order last heard from (oldest first)."""
        self._members: dict[str, set[str]] = {}
        """Consumer group → the client ids in it (no empty sets)."""
        self._producers: dict[str, set[str]] = {}
        """Producer group → the client ids in it (no empty sets): transaction checks."""
        self._by_connection: dict[int, set[str]] = {}
        """Connection id → the client ids registered on it (no empty sets)."""
        self._locks: dict[LockKey, tuple[str, int]] = {}
        """(group, queue) → (client id, when locked or renewed, ms)."""
        self._locks_of: dict[str, set[LockKey]] = {}
        """Client id → the locks it holds (no empty sets)."""
        self.notices = NoticeSchedule()

    def heartbeat(self, entry: ClientEntry, *, per_connection_max: int) -> set[str]:
        """Record a heartbeat; returns the consumer groups whose members changed (this
        client joined or left them, or others expired from them).  A client not registered
        is refused (SYSTEM_BUSY) when the table holds `clients_max`, or its connection
        `per_connection_max`; one registered never is."""
        changed = self.expire()
        known = self._clients.get(entry.client_id)
        if known is None and len(self._clients) >= self._clients_max:
            raise RemotingError(SYSTEM_BUSY, f"{len(self._clients)} clients are registered "
                                             f"(clients_max)")
        if known is None or known.connection_id != entry.connection_id:
            on_connection = len(self._by_connection.get(entry.connection_id, ()))
            if on_connection >= per_connection_max:
                raise RemotingError(SYSTEM_BUSY, f"{on_connection} client ids are registered "
                                                 f"on this connection "
                                                 f"(clients_per_connection_max)")
        before = set(known.consumer_groups) if known is not None else set()
        if known is not None:
            self._unindex(known)
        entry.seen_ms = now_ms()
        self._clients.pop(entry.client_id, None)
        self._clients[entry.client_id] = entry  # last: the newest heard from
        self._index(entry)
        return changed | (before ^ set(entry.consumer_groups))

    def connection_of(self, client_id: str) -> int | None:
        """The connection `client_id` last heartbeat on, None for a client not registered
        (a requester waiting for replies heartbeats as a producer)."""
        entry = self._clients.get(client_id)
        return None if entry is None else entry.connection_id

    def touch(self, connection_id: int) -> None:
        stamp = now_ms()
        for client_id in self._by_connection.get(connection_id, ()):
            entry = self._clients.pop(client_id)
            entry.seen_ms = stamp
            self._clients[client_id] = entry

    def unregister(self, client_id: str) -> set[str]:
        """Remove a client; returns the consumer groups it left."""
        return self._remove([client_id])

    def connection_closed(self, connection_id: int) -> set[str]:
        """Remove the clients of a closed connection; returns the groups they left."""
        return self._remove(list(self._by_connection.get(connection_id, ())))

    def expire(self) -> set[str]:
        """Remove the clients silent for `expiry_ms`; returns the groups they left."""
        deadline = now_ms() - self._expiry_ms
        silent = []
        for client_id, entry in self._clients.items():  # oldest first: stops at the first live
            if entry.seen_ms >= deadline:
                break
            silent.append(client_id)
        return self._remove(silent)

    def _remove(self, client_ids: list[str]) -> set[str]:
        groups: set[str] = set()
        for client_id in client_ids:
            entry = self._clients.pop(client_id, None)
            if entry is not None:
                self._unindex(entry)
                groups.update(entry.consumer_groups)
                self._drop_locks(client_id)
        return groups

    def _index(self, entry: ClientEntry) -> None:
        for group in entry.consumer_groups:
            self._members.setdefault(group, set()).add(entry.client_id)
        for group in entry.producer_groups:
            self._producers.setdefault(group, set()).add(entry.client_id)
        self._by_connection.setdefault(entry.connection_id, set()).add(entry.client_id)

    def _unindex(self, entry: ClientEntry) -> None:
        for group in entry.consumer_groups:
            _discard(self._members, group, entry.client_id)
        for group in entry.producer_groups:
            _discard(self._producers, group, entry.client_id)
        _discard(self._by_connection, entry.connection_id, entry.client_id)

    def consumers(self, group: str) -> list[ClientEntry]:
        self.expire()
        return [self._clients[client_id]
                for client_id in sorted(self._members.get(group, ()))]

    def producer_connections(self, group: str) -> list[int]:
        """The connections of the live producers of `group`, in client id order (RocketMQ's
        `ProducerManager#getAvailableChannel` picks among them)."""
        self.expire()
        return [self._clients[client_id].connection_id
                for client_id in sorted(self._producers.get(group, ()))]

    def subscription(self, group: str, topic: str) -> Subscription | None:
        found = None
        for entry in self.consumers(group):
            subscription = entry.subscriptions.get(group, {}).get(topic)
            if subscription is not None and (found is None or
                                             subscription.sub_version > found.sub_version):
                found = subscription
        return found

    def groups_of_client(self, client_id: str) -> frozenset[str]:
        """The consumer groups `client_id` is registered in (a read: nothing expires)."""
        entry = self._clients.get(client_id)
        return frozenset(entry.consumer_groups) if entry is not None else frozenset()

    def groups(self) -> list[str]:
        return sorted(self._members)

    def groups_of(self, topic: str) -> list[str]:
        return sorted({group for entry in self._clients.values()
                       for group, topics in entry.subscriptions.items() if topic in topics})

    def lock(self, group: str, client_id: str, queues: list[MessageQueue]) -> list[MessageQueue]:
        """Lock what no other live client holds; returns the queues this client holds."""
        stamp = now_ms()
        held = []
        for queue in queues:
            key = (group, queue)
            owner = self._locks.get(key)
            if owner is None or owner[0] == client_id or stamp - owner[1] > self._lock_expiry_ms:
                if owner is not None:
                    _discard(self._locks_of, owner[0], key)
                self._locks[key] = (client_id, stamp)
                self._locks_of.setdefault(client_id, set()).add(key)
                held.append(queue)
        return held

    def unlock(self, group: str, client_id: str, queues: list[MessageQueue]) -> None:
        for queue in queues:
            key = (group, queue)
            owner = self._locks.get(key)
            if owner is not None and owner[0] == client_id:
                del self._locks[key]
                _discard(self._locks_of, client_id, key)

    def _drop_locks(self, client_id: str) -> None:
        for key in self._locks_of.pop(client_id, ()):
            del self._locks[key]


def _discard(index: dict[Key, set[Value]], key: Key, value: Value) -> None:
    """Take `value` from `index[key]`, and the key with its last value."""
    values = index.get(key)
    if values is not None:
        values.discard(value)
        if not values:
            del index[key]
