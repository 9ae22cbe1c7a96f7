"""The writer's views: parse (requests.py), check, admit and put through the writer's one
produce core (produce.py, which the forward listener calls too), shape the answer
(statuses.py).

Under async flush on an async master a put is a copy into memory (microseconds), so the views
call the store directly on the event loop.  When a put waits (`store.put_waits`: sync flush, or
a sync master waiting for a follower's confirmation) they call `store.put_callback` /
`put_batch_callback` and await a future that the group commit completes from its thread after
the sync (completions.py: one loop wakeup per group), or the replication server on this loop
when a follower confirms: the loop never waits on fsync or on the network, and many requests
share one sync and one frame.  A follower's writer refuses
every produce request (403) before reading its body.  The put itself can still wait on
the loop, boundedly: for a segment roll (`allocate_wait_ms`) or a pool buffer
(`pool_borrow_timeout_ms`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from aiohttp import web

from mqstore.services.auth.http_access import require
from mqstore.services.auth.permissions import Perm, topic
from mqstore.services.common.http.answers import json_response
from mqstore.services.common.http.batch_wire import (
    BATCH_MEDIA_TYPE,
    RESULT_MEDIA_TYPE,
    BatchCodec,
    ResultCodec,
    WireFormatError,
)
from mqstore.services.common.http.bodies import read_body
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.produce import ProduceCore
from mqstore.services.writer.requests import (
    bad_request,
    messages_from_wire,
    read_json,
    require_media_type,
    wire_message_from_json,
)
from mqstore.services.writer.statuses import SUCCESS_HTTP_STATUS, refusal
from mqstore.storage import Message, MessageStore, PutResult, PutStatus

NOT_SYNCED_NOTE = ("written and readable, but its sync was not confirmed in time: durability "
                   "NOT confirmed")
NOT_REPLICATED_NOTE = ("written and readable here, but no follower confirmed it: replication "
                       "NOT confirmed")


class WriterHandlers:
    def __init__(self, core: ProduceCore, store: MessageStore,
                 settings: WriterSettings) -> None:
        self._core = core
        self._store = store
        self._settings = settings

    # -- views ------------------------------------------------------------------------------
    async def put_message(self, request: web.Request) -> web.Response:
        """POST /v1/topics/{topic}/messages: one JSON message."""
        self._core.refuse_on_follower()
        topic = request.match_info["topic"]
        document = await read_json(request, self._settings)
        self._core.check_topic(topic, where="topic")
        wire = wire_message_from_json(document, topic=topic, where="message")
        messages = messages_from_wire(self._core, [wire], where="message", batch=False)
        results = await self._put(messages, topics=(topic,), batch=False)
        return json_response(_result_json(results[0], messages[0].queue_id),
                             http_status=SUCCESS_HTTP_STATUS[results[0].status])

    async def put_topic_batch(self, request: web.Request) -> web.Response:
        """POST /v1/topics/{topic}/messages/batch: {"messages": [...]} of one topic."""
        self._core.refuse_on_follower()
        topic = request.match_info["topic"]
        document = await read_json(request, self._settings)
        self._core.check_topic(topic, where="topic")
        if not isinstance(document, dict) or document.keys() != {"messages"}:
            raise bad_request('the body must be an object with one field, "messages"')
        items = document["messages"]
        limit = self._settings.batch_messages_max
        if not isinstance(items, list) or not 0 < len(items) <= limit:
            raise bad_request(f"messages must be an array of 1..{limit} messages "
                              f"(batch_messages_max)")
        wires = [wire_message_from_json(item, topic=topic, where=f"messages[{index}]")
                 for index, item in enumerate(items)]
        messages = messages_from_wire(self._core, wires, where="messages", batch=True)
        results = await self._put(messages, topics=(topic,), batch=True)
        return self._json_results(messages, results)

    async def put_batch(self, request: web.Request) -> web.Response:
        """POST /v1/batch: a binary batch (batch_wire.BatchCodec), possibly of several topics."""
        self._core.refuse_on_follower()
        require_media_type(request, BATCH_MEDIA_TYPE)
        raw = await read_body(request, timeout_ms=self._settings.body_read_timeout_ms)
        try:
            wires = BatchCodec.decode(raw, messages_max=self._settings.batch_messages_max)
        except WireFormatError as error:
            raise bad_request(f"malformed batch: {error}") from None
        require(request, [topic(name, Perm.PUB) for name in sorted({w.topic for w in wires})])
        messages = messages_from_wire(self._core, wires, where="message", batch=True)
        results = await self._put(messages, topics=dict.fromkeys(
            [message.topic for message in messages]), batch=True)
        if RESULT_MEDIA_TYPE not in request.headers.get("Accept", ""):
            return self._json_results(messages, results)
        rows = [(result.status.value, message.queue_id, result.queue_offset,
                 result.physical_offset, result.store_timestamp_ms)
                for message, result in zip(messages, results, strict=True)]
        # A msg id is the store host (address + port) and the 8-byte physical offset.
        store_host_packed = bytes.fromhex(results[0].msg_id)[:-8]
        body = ResultCodec.encode(rows, store_host_packed=store_host_packed)
        return web.Response(status=SUCCESS_HTTP_STATUS[results[0].status], body=body,
                            content_type=RESULT_MEDIA_TYPE)

    # -- helpers ----------------------------------------------------------------------------
    async def _put(self, messages: list[Message], *, topics: Iterable[str],
                   batch: bool) -> list[PutResult]:
        """Store `messages` (one put or one batch put) of the distinct `topics`; raise the
        refusal if nothing was stored.  A batch's results share one status (the store is
        all or nothing).  The answer names the queue each message asked for, also for one
        that waits in the schedule topic (`ProduceCore.delayed`)."""
        self._core.admit(topics)
        results = await self._core.put(self._core.delayed(messages, batch=batch))
        status = results[0].status
        if status not in SUCCESS_HTTP_STATUS:
            raise refusal(status, results[0].reason, store=self._store,
                          retry_after_s=self._settings.retry_after_s)
        return results

    def _json_results(self, messages: Sequence[Message],
                      results: Sequence[PutResult]) -> web.Response:
        documents = [_result_json(result, message.queue_id)
                     for message, result in zip(messages, results, strict=True)]
        return json_response({"results": documents},
                             http_status=SUCCESS_HTTP_STATUS[results[0].status])


def _result_json(result: PutResult, queue_id: int) -> dict[str, Any]:
    document: dict[str, Any] = {
        "status": result.status.value, "msg_id": result.msg_id, "queue_id": queue_id,
        "queue_offset": result.queue_offset, "physical_offset": result.physical_offset,
        "store_timestamp_ms": result.store_timestamp_ms}
    if result.reason:
        note = (NOT_SYNCED_NOTE if result.status is PutStatus.FLUSH_DISK_TIMEOUT
                else NOT_REPLICATED_NOTE)
        document["reason"] = f"{note}: {result.reason}"
    return document

