"""Consumer offsets and queue offsets: codes 14, 15, 29, 30, 31, 32.

A group that never committed on a queue gets offset 0 when the queue still starts at 0
(RocketMQ's broker answers so when offset 0 is still stored: a new group on a young topic
reads from the beginning, whatever its `consumeFromWhere`), else QUERY_NOT_FOUND (22), after
which the client applies its `consumeFromWhere` (GET_MAX_OFFSET, 0, or a time search).
"""

from __future__ import annotations

from mqstore.services.notifier.remoting import headers
from mqstore.services.notifier.remoting.codes import (
    QUERY_NOT_FOUND,
    SUCCESS,
    SYSTEM_ERROR,
    RemotingError,
)
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.offset_table import OffsetCommitError


async def query_consumer_offset(front: Front, request: Command, peer: Peer) -> Command:
    """QUERY_CONSUMER_OFFSET (14)."""
    group = headers.text(request, "consumerGroup")
    topic = headers.text(request, "topic")
    queue_id = headers.queue_id(request)
    offset = front.offsets.query(group, topic, queue_id)
    if offset is None:
        if front.view.min_offset(topic, queue_id) != 0:
            raise RemotingError(QUERY_NOT_FOUND, f"Not found, V3_0_6_SNAPSHOT: {group} has no "
                                                 f"offset on {topic}/{queue_id}")
        offset = 0
    return request.answer(SUCCESS, ext_fields={"offset": str(offset)})


async def update_consumer_offset(front: Front, request: Command, peer: Peer) -> Command:
    """UPDATE_CONSUMER_OFFSET (15): written every offsets_flush_interval_ms; refused (1, with the
    reason) when the store cannot take it (offset_table.py)."""
    group = headers.text(request, "consumerGroup")
    topic = headers.text(request, "topic")
    queue_id = headers.number(request, "queueId", minimum=0, maximum=headers.INT32_MAX)
    offset = headers.number(request, "commitOffset", minimum=0)
    try:
        front.offsets.commit(group, topic, queue_id, offset)
    except OffsetCommitError as error:
        raise RemotingError(SYSTEM_ERROR, f"offset not committed: {error}") from None
    return request.answer(SUCCESS)


async def search_offset(front: Front, request: Command, peer: Peer) -> Command:
    """SEARCH_OFFSET_BY_TIMESTAMP (29): the first offset stored at or after the time."""
    topic, queue_id = headers.text(request, "topic"), headers.queue_id(request)
    timestamp_ms = headers.number(request, "timestamp")
    offset = front.view.offset_by_time(topic, queue_id, timestamp_ms)
    return request.answer(SUCCESS, ext_fields={"offset": str(offset)})


async def max_offset(front: Front, request: Command, peer: Peer) -> Command:
    """GET_MAX_OFFSET (30): the next offset to be written (exclusive)."""
    topic, queue_id = headers.text(request, "topic"), headers.queue_id(request)
    return request.answer(SUCCESS, ext_fields={
        "offset": str(front.view.max_offset(topic, queue_id))})


async def min_offset(front: Front, request: Command, peer: Peer) -> Command:
    """GET_MIN_OFFSET (31)."""
    topic, queue_id = headers.text(request, "topic"), headers.queue_id(request)
    return request.answer(SUCCESS, ext_fields={
        "offset": str(front.view.min_offset(topic, queue_id))})


async def earliest_store_time(front: Front, request: Command, peer: Peer) -> Command:
    """GET_EARLIEST_MSG_STORETIME (32): the store time of the oldest message kept (0: none)."""
    topic, queue_id = headers.text(request, "topic"), headers.queue_id(request)
    return request.answer(SUCCESS, ext_fields={
        "timestamp": str(store_time_at(front, topic, queue_id,
                                       front.view.min_offset(topic, queue_id)))})


def store_time_at(front: Front, topic: str, queue_id: int, offset: int) -> int:
    """The store time of the message at `offset`, 0 when there is none."""
    with front.view.get(topic, queue_id, offset, 1) as result:
        return result.messages[0].store_timestamp_ms if result.messages else 0
