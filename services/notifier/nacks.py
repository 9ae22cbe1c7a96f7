"""`POST /v1/groups/{group}/nacks`: a consumer group member reports a message it failed.

    POST /v1/groups/billing/nacks
    {"topic": "Orders", "queue_id": 3, "queue_offset": 17,
     "delay_level": 0, "max_reconsume_times": 16}

The HTTP door to what RocketMQ's push consumers get from CONSUMER_SEND_MSG_BACK (36): the
notifier reads the message at `queue_offset` of the queue (the consume queue vouches for it,
so a caller names only messages of a topic it may read) and has the writer store the copy
services/notifier/send_backs.py builds: in `%RETRY%<group>` waiting its delay level (0 or
absent: 3 + the message's reconsume times, so 10 s, 30 s, 1 min, ... by default; 1..N a
level of `store.message_delay_levels`, a larger one clamped to the last as RocketMQ does;
-1: straight to the dead letter queue), or in `%DLQ%<group>` once the message has been
consumed `max_reconsume_times` times (default `remoting.retry_max_times`, 16, RocketMQ's).
A group's members poll `%RETRY%<group>` beside their topic (the Python client does:
client/consumer.py), and commit the nacked message's offset as any other: the copy is the
one that comes again.  So no message is redelivered without bound, as on RocketMQ.

The answer: `{"group", "topic", "queue_id", "queue_offset", "stored_in": "%RETRY%<group>" or
"%DLQ%<group>", "dead_letter": bool, "reconsume_times": n (the copy's), "delay_level",
"delay_ms"}` (delay 0 for a dead letter).  Errors: 400 for a bad field, a system topic's
message or a group whose retry topic name is too long; 404 `NO_MESSAGE` when the queue has
no message at that offset (never written, or retention took it; `MESSAGE_CORRUPT` if damaged
on disk); 503 with Retry-After when the writer cannot take the copy (busy, unreachable, a
follower), 507 when its disk is full.  Nothing is lost on an error: the caller's offset has
not moved past the message unless it committed, and a repeated nack stores a second copy
(at least once, as RocketMQ's send-back).

Each nack is counted by outcome in the notifier's `mqstore_nacks_total{outcome}`, and a
dead letter also in `mqstore_remoting_dead_letters_total{path="nack"}`, which the chart's
dead letter alert watches (services/notifier/remoting/retry_counts.py).
"""

from __future__ import annotations

from typing import Protocol

from aiohttp import web

from mqstore.services.auth.http_access import require
from mqstore.services.auth.permissions import Perm
from mqstore.services.auth.permissions import topic as need_topic
from mqstore.services.common.http.answers import ServiceError, json_response
from mqstore.services.common.links.forward_wire import ForwardAnswer, ForwardRequest
from mqstore.services.common.settings.config_file import NotifierSettings
from mqstore.services.common.topics.rules import RETRY_PREFIX, is_system_topic
from mqstore.services.notifier.remoting.codes import RemotingError
from mqstore.services.notifier.remoting.retry_counts import RetryCounts
from mqstore.services.notifier.requests import (
    bad_request,
    check_group,
    check_topic,
    json_int,
    read_json_object,
)
from mqstore.services.notifier.send_backs import SendBack, send_back_copy
from mqstore.storage import GetStatus
from mqstore.storage.files.consumer_offsets import OFFSET_MAX, QUEUE_ID_MAX
from mqstore.storage.format.delay_levels import DelayLevels
from mqstore.storage.reads.store_view import StoreView

NACK_FIELDS = frozenset({"topic", "queue_id", "queue_offset", "delay_level",
                         "max_reconsume_times"})
RECONSUME_TIMES_MAX = (1 << 31) - 1
"""RocketMQ's reconsume times are an int."""
DISK_FULL_STATUS = "CREATE_MAPPED_FILE_FAILED"
ILLEGAL_STATUS = "MESSAGE_ILLEGAL"


class CopySender(Protocol):
    """What stores a copy: the writer's forward link (services/notifier/remoting/
    writer_link.py), which raises `RemotingError` when the writer cannot be reached."""

    async def send(self, request: ForwardRequest) -> ForwardAnswer: ...

    async def close(self) -> None: ...


class Nacks:
    def __init__(self, view: StoreView, link: CopySender | None, counts: RetryCounts,
                 settings: NotifierSettings, *, reconsume_times_max: int) -> None:
        """`link`: the writer's forward listener (None: every nack answers 503, the process
        has no writer to send copies to).  `reconsume_times_max`: the default of a nack
        that names no `max_reconsume_times` (`remoting.retry_max_times`)."""
        self._view = view
        self._link = link
        self._counts = counts
        self._settings = settings
        self._levels = DelayLevels.parse(view.config.message_delay_levels)
        self._reconsume_times_max = reconsume_times_max

    async def nack(self, request: web.Request) -> web.Response:
        group = check_group(request.match_info["group"])
        body = await read_json_object(request, fields=NACK_FIELDS, settings=self._settings)
        topic = body.get("topic")
        if not isinstance(topic, str):
            raise bad_request("topic is required (a string)")
        check_topic(topic, size_bytes_max=self._view.config.topic_size_bytes_max)
        require(request, [need_topic(topic, Perm.SUB)])
        if is_system_topic(topic):
            raise bad_request(f"{topic} is a system topic: its messages are not consumed, "
                              f"so not nacked")
        if "queue_id" not in body or "queue_offset" not in body:
            raise bad_request("queue_id and queue_offset are required: where the message "
                              "is in the topic, as the poll answered")
        queue_id = json_int(body, "queue_id", minimum=0, maximum=QUEUE_ID_MAX, default=0)
        queue_offset = json_int(body, "queue_offset", minimum=0, maximum=OFFSET_MAX, default=0)
        delay_level = json_int(body, "delay_level", minimum=-1,
                               maximum=RECONSUME_TIMES_MAX, default=0)
        reconsume_times_max = json_int(body, "max_reconsume_times", minimum=0,
                                       maximum=RECONSUME_TIMES_MAX,
                                       default=self._reconsume_times_max)
        try:
            check_topic(RETRY_PREFIX + group,
                        size_bytes_max=self._view.config.topic_size_bytes_max)
        except ServiceError as error:
            raise bad_request(f"group {group} has no retry topic: {RETRY_PREFIX}{group} "
                              f"breaks the topic rule: {error.reason}") from None
        copy = self._copy(topic, queue_id, queue_offset, group, delay_level=delay_level,
                          max_reconsume_times=reconsume_times_max)
        try:
            await self._stored(copy.forward)
        except ServiceError:
            self._counts.nack("refused")
            raise
        self._counts.nack("dead_letter" if copy.dead_letter else "retry")
        level = self._levels.clamp(copy.delay_level) if copy.delay_level else 0
        return json_response({
            "group": group, "topic": topic, "queue_id": queue_id, "queue_offset": queue_offset,
            "stored_in": copy.forward.topic, "dead_letter": copy.dead_letter,
            "reconsume_times": copy.forward.reconsume_times, "delay_level": level,
            "delay_ms": (self._levels.delay_ms(level) or 0) if level else 0})

    def _copy(self, topic: str, queue_id: int, queue_offset: int, group: str, *,
              delay_level: int, max_reconsume_times: int) -> SendBack:
        """The copy of the message at the queue's offset (its body copied out of the
        mapping before the read is released)."""
        with self._view.get(topic, queue_id, queue_offset, 1) as result:
            if result.status is GetStatus.MESSAGE_CORRUPT:
                raise ServiceError(404, "MESSAGE_CORRUPT", result.reason)
            if result.status is not GetStatus.FOUND or \
                    result.messages[0].queue_offset != queue_offset:
                raise ServiceError(404, "NO_MESSAGE", f"{topic} queue {queue_id} has no "
                                   f"message at offset {queue_offset} ({result.status.value}; "
                                   f"its offsets are {result.min_offset}.."
                                   f"{result.max_offset - 1})")
            return send_back_copy(result.messages[0], group, delay_level=delay_level,
                                  max_reconsume_times=max_reconsume_times)

    async def _stored(self, forward: ForwardRequest) -> None:
        """Have the writer store the copy; the error to answer if it does not."""
        retry_after = {"Retry-After": str(self._settings.retry_after_s)}
        if self._link is None:
            raise ServiceError(503, "NO_WRITER", "this notifier has no link to the writer "
                               "(nacks need remoting.writer_address)", headers=retry_after)
        try:
            answer = await self._link.send(forward)
        except RemotingError as error:
            raise ServiceError(503, "WRITER_UNAVAILABLE", error.remark,
                               headers=retry_after) from None
        if answer.results:
            return
        reason = f"the writer did not store the copy: {answer.status}: {answer.reason}"
        if answer.status == ILLEGAL_STATUS:
            raise ServiceError(400, answer.status, reason)
        if answer.status == DISK_FULL_STATUS:
            raise ServiceError(507, answer.status, reason)
        raise ServiceError(503, answer.status, reason, headers=retry_after)
