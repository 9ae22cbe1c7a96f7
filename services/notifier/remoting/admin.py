"""Administration: topics (17, 21, 351, 202), consumer progress (208), offset reset (222),
the broker's status (28).  What `mqadmin updateTopic`, `topicStatus`, `consumerProgress`,
`resetOffsetByTime`, `brokerStatus` and `clusterList` ask.

`resetOffsetByTime` sets the group's committed offsets (the first message stored at or after
the time, per queue) and, as RocketMQ's broker does, tells the group's live consumers to
seek there (RESET_CONSUMER_CLIENT_OFFSET, oneway, through the server's `push`).
"""

from __future__ import annotations

import time

from mqstore.services.notifier.remoting import bodies, headers
from mqstore.services.notifier.remoting.bodies import MessageQueue, QueueKeyed
from mqstore.services.notifier.remoting.codes import (
    FLAG_ONEWAY,
    RESET_CONSUMER_CLIENT_OFFSET,
    SUCCESS,
    SYSTEM_ERROR,
    TOPIC_NOT_EXIST,
    RemotingError,
)
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.offset_table import OffsetCommitError
from mqstore.services.notifier.remoting.offsets import store_time_at
from mqstore.services.notifier.remoting.topics import PERM_READ_WRITE, TopicConfig

STARTED_MS = int(time.time() * 1000)


async def create_topic(front: Front, request: Command, peer: Peer) -> Command:
    """UPDATE_AND_CREATE_TOPIC (17)."""
    topic = headers.text(request, "topic")
    limit = front.topics.queue_count_max
    config = TopicConfig(
        topic, headers.number(request, "readQueueNums", minimum=1, maximum=limit),
        headers.number(request, "writeQueueNums", minimum=1, maximum=limit),
        headers.number(request, "perm", minimum=0, maximum=7, default=PERM_READ_WRITE))
    front.topics.create(config)
    return request.answer(SUCCESS)


async def all_topic_config(front: Front, request: Command, peer: Peer) -> Command:
    """GET_ALL_TOPIC_CONFIG (21): one page holding every topic."""
    table = {}
    for name in front.topics.names():
        config = front.topics.get(name)
        if config is not None:
            table[name] = config.to_json()
    return request.answer(SUCCESS, body=bodies.encode({
        "topicConfigTable": table, "dataVersion": {"counter": 0, "timestamp": STARTED_MS}}))


async def topic_config(front: Front, request: Command, peer: Peer) -> Command:
    """GET_TOPIC_CONFIG (351, 5.x)."""
    config = front.topics.get(headers.text(request, "topic"))
    if config is None:
        raise RemotingError(TOPIC_NOT_EXIST, "No topic in this broker.")
    return request.answer(SUCCESS, body=bodies.encode(config.to_json()))


async def topic_stats(front: Front, request: Command, peer: Peer) -> Command:
    """GET_TOPIC_STATS_INFO (202): min and max offset and last store time per queue."""
    topic = headers.text(request, "topic")
    config = front.topics.require(topic)
    table = QueueKeyed()
    view = front.view
    for queue_id in range(config.read_queue_nums):
        high = view.max_offset(topic, queue_id)
        table[_queue(front, topic, queue_id)] = {
            "minOffset": view.min_offset(topic, queue_id), "maxOffset": high,
            "lastUpdateTimestamp": store_time_at(front, topic, queue_id, high - 1)
            if high > 0 else 0}
    return request.answer(SUCCESS, body=bodies.encode({"offsetTable": table,
                                                       "topicPutTps": 0.0}))


async def consume_stats(front: Front, request: Command, peer: Peer) -> Command:
    """GET_CONSUME_STATS (208): per queue, the broker's end and the group's offset."""
    group = headers.text(request, "consumerGroup")
    asked = headers.optional_text(request, "topic")
    topics = [asked] if asked else _topics_of(front, group)
    table = QueueKeyed()
    for topic in topics:
        config = front.topics.get(topic)
        if config is None:
            continue
        committed = front.offsets.fetch(group, topic)
        for queue_id in range(config.read_queue_nums):
            consumer = committed.get(queue_id, 0)
            table[_queue(front, topic, queue_id)] = {
                "brokerOffset": front.view.max_offset(topic, queue_id),
                "consumerOffset": consumer, "pullOffset": consumer,
                "lastTimestamp": store_time_at(front, topic, queue_id, consumer - 1)
                if consumer > 0 else 0}
    return request.answer(SUCCESS, body=bodies.encode({"consumeTps": 0.0,
                                                       "offsetTable": table}))


async def reset_offset(front: Front, request: Command, peer: Peer) -> Command:
    """INVOKE_BROKER_TO_RESET_OFFSET (222): set the group's offsets to a time (or offset)."""
    topic, group = headers.text(request, "topic"), headers.text(request, "group")
    timestamp_ms = headers.number(request, "timestamp")
    only_queue = headers.number(request, "queueId", default=-1)
    exact = headers.number(request, "offset", default=-1)
    config = front.topics.require(topic)
    table = QueueKeyed()
    for queue_id in range(config.read_queue_nums):
        if only_queue >= 0 and queue_id != only_queue:
            continue
        offset = exact if exact >= 0 else front.view.offset_by_time(topic, queue_id,
                                                                     timestamp_ms)
        try:
            front.offsets.commit(group, topic, queue_id, offset)
        except OffsetCommitError as error:
            raise RemotingError(SYSTEM_ERROR, f"offsets not reset: {error}") from None
        table[_queue(front, topic, queue_id)] = offset
    await front.offsets.flush()
    body = bodies.encode({"offsetTable": table})
    for entry in front.clients.consumers(group):  # running consumers seek there too
        front.push(entry.connection_id, Command(
            RESET_CONSUMER_CLIENT_OFFSET, next(front.opaques), FLAG_ONEWAY,
            {"topic": topic, "group": group, "timestamp": str(timestamp_ms),
             "isForce": "true"}, body))
    return request.answer(SUCCESS, body=body)


async def runtime_info(front: Front, request: Command, peer: Peer) -> Command:
    """GET_BROKER_RUNTIME_INFO (28): `brokerStatus`, `clusterList`."""
    view = front.view
    earliest = min((store_time_at(front, info.topic, info.queue_id, info.min_offset)
                    for info in view.queues()[:64] if info.max_offset > info.min_offset),
                   default=0)
    table = {"brokerVersionDesc": "V4_9_4", "brokerVersion": "401",
             "bootTimestamp": str(STARTED_MS), "brokerName": front.settings.broker_name,
             "commitLogMinOffset": str(view.log.min_position),
             "commitLogMaxOffset": str(view.log.committed_position),
             "dispatchMaxBuffer": "0", "earliestMessageTimeStamp": str(earliest),
             "putTps": "0.0 0.0 0.0", "getTransferedTps": "0.0 0.0 0.0",
             "getTransferredTps": "0.0 0.0 0.0", "msgPutTotalTodayNow": "0",
             "msgGetTotalTodayNow": "0", "msgPutTotalYesterdayMorning": "0",
             "msgGetTotalYesterdayMorning": "0", "msgPutTotalTodayMorning": "0",
             "msgGetTotalTodayMorning": "0", "commitLogDiskRatio": "0.0",
             "brokerActive": "true", "pageCacheLockTimeMills": "0",
             "remoteHeldPulls": str(front.held.held_count),
             "remoteWriterSendsInFlight": str(front.link.in_flight)}
    return request.answer(SUCCESS, body=bodies.encode({"table": table}))


def _queue(front: Front, topic: str, queue_id: int) -> MessageQueue:
    return MessageQueue(topic, front.settings.broker_name, queue_id)


def _topics_of(front: Front, group: str) -> list[str]:
    """Topics the group committed offsets on, or subscribes to."""
    found = {topic for topic in front.topics.names() if front.offsets.fetch(group, topic)}
    for entry in front.clients.consumers(group):
        found.update(entry.subscriptions.get(group, {}))
    return sorted(found)
