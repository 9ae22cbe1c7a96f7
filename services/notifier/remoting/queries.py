"""Lookups: QUERY_MESSAGE (12, by key or message id) and VIEW_MESSAGE_BY_ID (33, by the
commit log position inside an offset msg id).  Both answer whole records as stored.
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
from mqstore.storage import CorruptRecordError, NoRecordError

UNIQUE_KEY_QUERY_RESULTS_MAX = 32
"""A query by message id (`_UNIQUE_KEY_QUERY=true`) answers at most this many, as RocketMQ's
broker does (`defaultQueryMaxNum`)."""


def record_at(front: Front, physical_offset: int) -> bytes:
    """The whole record of the message at `physical_offset`, its bytes as stored.  Only a
    message its consume queue points at is served (`StoreView.message_at`): a record carried
    inside another message's body, or one not dispatched yet, answers SYSTEM_ERROR with the
    reason in the remark."""
    try:
        message = front.view.message_at(physical_offset)
    except (NoRecordError, CorruptRecordError) as error:
        raise RemotingError(SYSTEM_ERROR, f"can not find message by the offset "
                                          f"{physical_offset}: {error}") from None
    return _record_bytes(front, physical_offset, message.total_size)


def _record_bytes(front: Front, physical_offset: int, size_bytes: int) -> bytes:
    segment = front.view.log.find(physical_offset)
    if segment is None or not segment.hold():
        raise RemotingError(SYSTEM_ERROR, f"can not find message by the offset "
                                          f"{physical_offset}")
    try:
        start = physical_offset - segment.start_position
        return bytes(segment.mapping[start:start + size_bytes])
    finally:
        segment.release()


async def view_by_id(front: Front, request: Command, peer: Peer) -> Command:
    """VIEW_MESSAGE_BY_ID (33)."""
    physical_offset = headers.number(request, "offset", minimum=0)
    return request.answer(SUCCESS, body=record_at(front, physical_offset))


async def query_message(front: Front, request: Command, peer: Peer) -> Command:
    """QUERY_MESSAGE (12): by key (KEYS) or by message id (UNIQ_KEY)."""
    topic, key = headers.text(request, "topic"), headers.text(request, "key")
    asked = headers.number(request, "maxNum", minimum=1, maximum=headers.INT32_MAX)
    limit = front.store_config.index_query_results_max
    if headers.flag(request, "_UNIQUE_KEY_QUERY"):
        limit = min(limit, UNIQUE_KEY_QUERY_RESULTS_MAX)
    begin_ms = headers.number(request, "beginTimestamp", minimum=0)
    end_ms = headers.number(request, "endTimestamp", minimum=0)
    if front.view.index is None:
        raise RemotingError(SYSTEM_ERROR, "the index is disabled (store.index_enabled=false)")
    found = front.view.query_by_key(topic, key, begin_ms, end_ms, min(asked, limit))
    if not found:
        raise RemotingError(QUERY_NOT_FOUND, f"can not find message, maybe time range not "
                                             f"correct: {topic} key {key}")
    # The index found these (it holds only dispatched messages' positions): no second check.
    body = b"".join(_record_bytes(front, message.physical_offset, message.total_size)
                    for message in found)
    return request.answer(SUCCESS, body=body, ext_fields={
        "indexLastUpdateTimestamp": str(max(m.store_timestamp_ms for m in found)),
        "indexLastUpdatePhyoffset": str(max(m.physical_offset for m in found))})
