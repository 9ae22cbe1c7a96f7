"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): reads held by long polling.

A pull answers the stored records' bytes as they are (the commit log's format is
RocketMQ's): the body is the records one after the other, nothing decoded or re-encoded.
When the queue has nothing past the offset and the request may be suspended (sysFlag 0x2),
it is held (the notifier's `HeldPulls`, keyed by topic and queue) until the indexer's notice
says the queue moved past it, or the hold ends (`suspendTimeoutMillis`, at most
`pull_suspend_ms_max`); then it reads once more and answers (RocketMQ's
`PullRequestHoldService` and `notifyMessageArriving`).

| store status                          | code                        | nextBeginOffset |
|---------------------------------------|-----------------------------|-----------------|
| FOUND                                 | 0 SUCCESS + records         | past the scan   |
| NO_MATCHED_MESSAGE, WAS_REMOVING,     | 20 PULL_RETRY_IMMEDIATELY   | past the scan   |
| MESSAGE_CORRUPT (skipped, logged)     |                             |                 |
| NO_MESSAGE_IN_QUEUE                   | 19 if offset 0, else 21     | 0               |
| OFFSET_OVERFLOW_ONE, OFFSET_FOUND_NULL| 19 PULL_NOT_FOUND           | offset / next   |
| OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL| 21 PULL_OFFSET_MOVED       | max / min       |

The subscription is the request's (sysFlag 0x4, as lite and pull consumers send it), else
the one the group's heartbeat registered (push consumers), else, for a TAG pull, every
message: tag filtering is advisory (clients filter again by the tag string), so a pull
never drops a match.  A SQL92 subscription is the broker's alone to apply: filters.py says
which subscription a pull gets and how one is refused.  With sysFlag 0x1 the pull also
commits `commitOffset` for the group.
"""

from __future__ import annotations

import contextlib
import logging

from mqstore.services.notifier.held import HeldPullsClientFullError, HeldPullsFullError
from mqstore.services.notifier.pulls import long_poll
from mqstore.services.notifier.remoting import headers
from mqstore.services.notifier.remoting.codes import (
    INVALID_PARAMETER,
    PULL_NOT_FOUND,
    PULL_OFFSET_MOVED,
    PULL_RETRY_IMMEDIATELY,
    SUCCESS,
    SYSTEM_BUSY,
    SYSTEM_ERROR,
    RemotingError,
)
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.filters import pull_filter
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.offset_table import OffsetCommitError
from mqstore.storage import GetResult, GetStatus

log = logging.getLogger("mqstore.remoting")

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
VERSION_5_0_0 = 413
"""5.x clients expect INVALID_PARAMETER for a bad queue id; 4.9.4 ones SYSTEM_ERROR."""
MAX_MESSAGES_MAX = 1024


async def pull(front: Front, request: Command, peer: Peer) -> Command:
    group = headers.text(request, "consumerGroup")
    topic = headers.text(request, "topic")
    queue_id = headers.queue_id(request)
    offset = headers.number(request, "queueOffset", minimum=0)
    max_messages = headers.number(request, "maxMsgNums", minimum=1, maximum=headers.INT32_MAX)
    sysflag = headers.number(request, "sysFlag", minimum=0, maximum=headers.INT32_MAX)
    config = front.topics.require(topic)
    if not 0 <= queue_id < config.read_queue_nums:
        raise RemotingError(INVALID_PARAMETER if request.version >= VERSION_5_0_0
                            else SYSTEM_ERROR,
                            f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                            f"topicConfig.readQueueNums:[{config.read_queue_nums}]")
    selected = pull_filter(front, request, group=group, topic=topic, sysflag=sysflag)
    if sysflag & FLAG_COMMIT_OFFSET:
        commit = headers.number(request, "commitOffset", default=-1)
        if commit >= 0:
            with contextlib.suppress(OffsetCommitError):  # the pull is served all the same
                front.offsets.commit(group, topic, queue_id, commit)
    hold_ms = 0
    if sysflag & FLAG_SUSPEND:
        hold_ms = min(headers.number(request, "suspendTimeoutMillis", minimum=0, default=0),
                      front.settings.pull_suspend_ms_max)
    try:
        return await long_poll(
            front.view, front.held, topic, queue_id, offset, min(max_messages, MAX_MESSAGES_MAX),
            tags=selected.tags, property_filter=selected.properties, records_only=True,
            wait_ms=hold_ms,
            client=peer.address, on_hold=_nothing, on_woken=front.on_woken,
            answer=lambda result: _answer(request, result, offset=offset,
                                          where=f"{topic}/{queue_id}"))
    except HeldPullsClientFullError:
        raise RemotingError(SYSTEM_BUSY, f"[OVERLOAD] this client holds "
                                         f"{front.held.held_per_client_max} pulls already "
                                         f"(remoting.held_pulls_per_client_max)") from None
    except HeldPullsFullError:
        # Not PULL_NOT_FOUND: a push consumer would pull again at once, and spin.  An
        # error makes it wait `pullTimeDelayMillsWhenException` (1 s) first.
        raise RemotingError(SYSTEM_BUSY, f"[OVERLOAD] {front.held.held_count} pulls are "
                                         f"held already (remoting.held_pulls_max="
                                         f"{front.held.held_max})") from None


def _nothing() -> None:
    pass


def _answer(request: Command, result: GetResult, *, offset: int, where: str) -> Command:
    status = result.status
    next_offset = result.next_offset
    body = b""
    if result.records:
        code = SUCCESS
        body = b"".join(result.records)
    elif status is GetStatus.NO_MESSAGE_IN_QUEUE:
        code = PULL_NOT_FOUND if offset == 0 else PULL_OFFSET_MOVED
    elif status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.OFFSET_FOUND_NULL):
        code = PULL_NOT_FOUND
    elif status in (GetStatus.OFFSET_OVERFLOW_BADLY, GetStatus.OFFSET_TOO_SMALL):
        code = PULL_OFFSET_MOVED
    else:
        if status is GetStatus.MESSAGE_CORRUPT:
            log.error("pull of %s skips a damaged record: %s", where, result.reason)
        code = PULL_RETRY_IMMEDIATELY
    return request.answer(code, body=body, ext_fields={
        "suggestWhichBrokerId": "0", "nextBeginOffset": str(next_offset),
        "minOffset": str(result.min_offset), "maxOffset": str(result.max_offset)})
