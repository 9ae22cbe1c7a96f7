"""Heartbeats, consumer lists, unregistering, orderly locks: codes 34, 35, 38, 41, 42, 203, 300.

The state lives in `ClientTable` (client_table.py); these parse the bodies and shape the
answers.  A heartbeat's subscriptions are kept as sent (`subString`, e.g. `TagA || TagB`);
the tag hash codes a client sends (`codeSet`; Go sends them as strings, of UTF-8 bytes) are
not trusted: a pull recomputes them from the tags (Java `String.hashCode`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from mqstore.services.notifier.remoting import bodies, headers
from mqstore.services.notifier.remoting.bodies import MessageQueue
from mqstore.services.notifier.remoting.client_table import ClientEntry, Subscription, now_ms
from mqstore.services.notifier.remoting.codes import (
    CONSUMER_NOT_ONLINE,
    FLAG_ONEWAY,
    NOTIFY_CONSUMER_IDS_CHANGED,
    SUCCESS,
    SYSTEM_ERROR,
    RemotingError,
)
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command


async def heartbeat(front: Front, request: Command, peer: Peer) -> Command:
    """HEART_BEAT (34).  Past `heartbeat_groups_max` groups it is refused whole; the work
    is the heartbeat's size plus one (debounced) notice per group it joined or left."""
    document = bodies.loads_object(request.body, what="heartbeat")
    client_id = document.get("clientID")
    if not isinstance(client_id, str) or not client_id or not headers.is_text(client_id):
        raise RemotingError(SYSTEM_ERROR, "heartbeat: clientID must be a non-empty string")
    consumers, producers = _list(document, "consumerDataSet"), _list(document, "producerDataSet")
    groups_max = front.settings.heartbeat_groups_max
    if len(consumers) + len(producers) > groups_max:
        raise RemotingError(SYSTEM_ERROR, f"heartbeat: {len(consumers)} consumer and "
                                          f"{len(producers)} producer groups, over "
                                          f"{groups_max} (heartbeat_groups_max)")
    entry = ClientEntry(client_id, peer.connection_id, peer.address, request.language,
                        request.version, now_ms())
    for consumer in consumers:
        _add_consumer(entry, consumer)
    for producer in producers:
        if isinstance(producer.get("groupName"), str):
            entry.producer_groups.add(producer["groupName"])
    changed = front.clients.heartbeat(
        entry, per_connection_max=front.settings.clients_per_connection_max)
    for group in changed:
        notify_group_changed(front, group)
    return request.answer(SUCCESS)


def _add_consumer(entry: ClientEntry, consumer: dict[str, Any]) -> None:
    """One ConsumerData of a heartbeat: its group and its subscriptions."""
    group = consumer.get("groupName")
    if not isinstance(group, str) or not group or not headers.is_text(group):
        raise RemotingError(SYSTEM_ERROR, "heartbeat: a consumer has no groupName")
    entry.consumer_groups[group] = {key: consumer.get(key) for key in (
        "consumeType", "messageModel", "consumeFromWhere")}
    topics = entry.subscriptions.setdefault(group, {})
    for data in _list(consumer, "subscriptionDataSet"):
        topic = data.get("topic")
        if isinstance(topic, str):
            topics[topic] = Subscription(topic, str(data.get("subString") or "*"),
                                         str(data.get("expressionType") or "TAG"),
                                         _int(data.get("subVersion")))


async def unregister(front: Front, request: Command, peer: Peer) -> Command:
    """UNREGISTER_CLIENT (35)."""
    for group in front.clients.unregister(headers.text(request, "clientID")):
        notify_group_changed(front, group)
    return request.answer(SUCCESS)


async def consumer_list(front: Front, request: Command, peer: Peer) -> Command:
    """GET_CONSUMER_LIST_BY_GROUP (38): every live client id of the group, sorted."""
    group = headers.text(request, "consumerGroup")
    ids = [entry.client_id for entry in front.clients.consumers(group)]
    return request.answer(SUCCESS, body=bodies.encode({"consumerIdList": ids}))


async def lock_batch(front: Front, request: Command, peer: Peer) -> Command:
    """LOCK_BATCH_MQ (41)."""
    group, client_id, queues = _lock_body(request)
    held = front.clients.lock(group, client_id, queues)
    return request.answer(SUCCESS, body=bodies.encode({"lockOKMQSet": held}))


async def unlock_batch(front: Front, request: Command, peer: Peer) -> Command:
    """UNLOCK_BATCH_MQ (42)."""
    group, client_id, queues = _lock_body(request)
    front.clients.unlock(group, client_id, queues)
    return request.answer(SUCCESS)


async def connection_list(front: Front, request: Command, peer: Peer) -> Command:
    """GET_CONSUMER_CONNECTION_LIST (203): who consumes in the group, and how."""
    group = headers.text(request, "consumerGroup")
    consumers = front.clients.consumers(group)
    if not consumers:
        raise RemotingError(CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
    first = consumers[0].consumer_groups[group]
    subscriptions = {topic: {"topic": topic, "subString": sub.expression,
                             "expressionType": sub.expression_type,
                             "subVersion": sub.sub_version, "tagsSet": [], "codeSet": [],
                             "classFilterMode": False}
                     for entry in consumers
                     for topic, sub in entry.subscriptions.get(group, {}).items()}
    body = {"connectionSet": [{"clientId": entry.client_id, "clientAddr": entry.address,
                               "language": entry.language, "version": entry.version}
                              for entry in consumers],
            "subscriptionTable": subscriptions, **first}
    return request.answer(SUCCESS, body=bodies.encode(body))


async def consumed_by(front: Front, request: Command, peer: Peer) -> Command:
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""
    topic = headers.text(request, "topic")
    groups = sorted(set(front.clients.groups_of(topic)) | set(front.offsets.groups_of(topic)))
    return request.answer(SUCCESS, body=bodies.encode({"groupList": groups}))


def notify_group_changed(front: Front, group: str) -> int:
    """NOTIFY_CONSUMER_IDS_CHANGED (40, oneway) to every live consumer of `group`: each
    rebalances now instead of on its 20 s timer.  At most one round per group per
    `notify_debounce_ms`: the first change is told at once, later ones in the window are
    coalesced into one round at its end.  Returns how many were told now."""
    notices = front.clients.notices
    delay_ms = notices.delay_ms(group, now=now_ms(),
                                window_ms=front.settings.notify_debounce_ms)
    if delay_ms is None:
        return 0  # already waits for the end of its window
    if delay_ms > 0:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): nothing could run it later
            return _tell(front, group)
        notices.scheduled(group, loop.call_later(delay_ms / 1000, _tell, front, group))
        return 0
    return _tell(front, group)


def _tell(front: Front, group: str) -> int:
    front.clients.notices.told(group, now=now_ms())
    told = 0
    for entry in front.clients.consumers(group):
        told += front.push(entry.connection_id, Command(
            NOTIFY_CONSUMER_IDS_CHANGED, next(front.opaques), FLAG_ONEWAY,
            {"consumerGroup": group}))
    return told


def _lock_body(request: Command) -> tuple[str, str, list[MessageQueue]]:
    document = bodies.loads_object(request.body, what="lock")
    group, client_id = document.get("consumerGroup"), document.get("clientId")
    if not isinstance(group, str) or not isinstance(client_id, str):
        raise RemotingError(SYSTEM_ERROR, "lock: consumerGroup and clientId are required")
    queues = [bodies.queue_of(item, what="lock mqSet") for item in _list(document, "mqSet")]
    return group, client_id, queues


def _list(document: dict[str, Any], name: str) -> list[dict[str, Any]]:
    items = document.get(name) or []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise RemotingError(SYSTEM_ERROR, f"{name} must be a list of objects")
    return items


def _int(value: object) -> int:
    if isinstance(value, int | str) and not isinstance(value, bool):
        try:
            return int(value)
        except ValueError:
            return 0
    return 0


