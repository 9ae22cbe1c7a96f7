"""The notifier's views: check the request (requests.py), call one domain function, answer.

Reads run on the event loop: a get copies at most `get_transfer_bytes_max` (256 KiB) out
of mapped memory.  Offset commits run on a worker thread: they take a file lock and fsync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from mqstore.services.auth.http_access import require
from mqstore.services.auth.permissions import Perm
from mqstore.services.auth.permissions import topic as need_topic
from mqstore.services.common.http.answers import ServiceError, json_response
from mqstore.services.common.settings.config_file import NotifierSettings
from mqstore.services.notifier.answers import message_json
from mqstore.services.notifier.held import HeldPullsClientFullError, HeldPullsFullError
from mqstore.services.notifier.metrics import STATUS_KEY, held_marker
from mqstore.services.notifier.pulls import Puller, committed_or_min
from mqstore.services.notifier.requests import (
    DEFAULT_MAX_MESSAGES,
    TIMESTAMP_MS_MAX,
    bad_request,
    check_group,
    check_topic,
    json_int,
    offsets_of,
    parse_int,
    query_int,
    queue_id_of,
    read_json_object,
    tags_of,
)
from mqstore.storage import (
    CorruptRecordError,
    GetStatus,
    NoRecordError,
    NotDispatchedError,
    StoreFormatError,
)
from mqstore.storage.files.consumer_offsets import (
    OFFSET_MAX,
    ConsumerOffsets,
    GroupOffsetsTooLargeError,
    GroupsFullError,
    OffsetsLockTimeoutError,
)
from mqstore.storage.reads.store_view import StoreView

POLL_FIELDS = frozenset({"max_messages", "wait_ms", "tags", "offsets"})
COMMIT_FIELDS = frozenset({"topic", "offsets", "reset"})


class NotifierHandlers:
    def __init__(self, view: StoreView, offsets: ConsumerOffsets, puller: Puller,
                 settings: NotifierSettings, *, topic_names: Callable[[], list[str]]) -> None:
        """`topic_names`: the topics to list (created or holding queues, not deleted)."""
        self._topic_names = topic_names
        self._view = view
        self._offsets = offsets
        self._puller = puller
        self._settings = settings
        self._topic_bytes_max = view.config.topic_size_bytes_max

    # -- pulls -------------------------------------------------------------------------------
    async def pull(self, request: web.Request) -> web.Response:
        """GET /v1/topics/{topic}/queues/{queue_id}/messages?offset=&max_messages=&wait_ms=
        &tags="""
        topic = check_topic(request.match_info["topic"], size_bytes_max=self._topic_bytes_max)
        queue_id = queue_id_of(request.match_info["queue_id"])
        offset = query_int(request, "offset")
        max_messages, wait_ms = self._pull_bounds(
            lambda name, default, maximum, setting: query_int(
                request, name, minimum=1 if name == "max_messages" else 0, maximum=maximum,
                default=default, setting=setting))
        tags = tags_of(request.query.get("tags"))
        document = await self._held(self._puller.pull_queue(
            topic, queue_id, offset, max_messages=max_messages, tags=tags, wait_ms=wait_ms,
            client=request.remote or "", on_hold=held_marker(request)))
        request[STATUS_KEY] = document["status"]
        return json_response(document)

    async def poll_group(self, request: web.Request) -> web.Response:
        """POST /v1/groups/{group}/topics/{topic}/poll {"max_messages", "wait_ms", "tags",
        "offsets"}"""
        group = check_group(request.match_info["group"])
        topic = check_topic(request.match_info["topic"], size_bytes_max=self._topic_bytes_max)
        body = await read_json_object(request, fields=POLL_FIELDS,
                                      settings=self._settings)
        max_messages, wait_ms = self._pull_bounds(
            lambda name, default, maximum, setting: json_int(
                body, name, minimum=1 if name == "max_messages" else 0, maximum=maximum,
                default=default, setting=setting))
        tags = tags_of(body.get("tags"))
        given = offsets_of(body.get("offsets", {}), "offsets")
        committed = self._stored(lambda: self._offsets.fetch(group, topic))
        start = committed_or_min(self._view, topic, given=given, committed=committed)
        document = await self._held(self._puller.poll_group(
            topic, start_offset=start, max_messages=max_messages, tags=tags, wait_ms=wait_ms,
            client=request.remote or "", on_hold=held_marker(request)))
        request[STATUS_KEY] = "FOUND" if document["messages"] else "EMPTY"
        return json_response({"group": group, "topic": topic, **document})

    def _pull_bounds(self, read: Callable[[str, int, int, str], int]) -> tuple[int, int]:
        settings = self._settings
        # The default never exceeds the bound: with pull_messages_max below 32, a pull that
        # named no max_messages was refused for a value it never sent.
        max_messages = read("max_messages", min(DEFAULT_MAX_MESSAGES, settings.pull_messages_max),
                            settings.pull_messages_max, "pull_messages_max")
        wait_ms = read("wait_ms", 0, settings.pull_wait_ms_max, "pull_wait_ms_max")
        return max_messages, wait_ms

    async def _held(self, pull: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        try:
            return await pull
        except HeldPullsClientFullError as error:
            raise ServiceError(429, "BUSY", str(error), headers={
                "Retry-After": str(self._settings.retry_after_s)}) from None
        except HeldPullsFullError as error:
            raise ServiceError(503, "BUSY", str(error), headers={
                "Retry-After": str(self._settings.retry_after_s)}) from None

    # -- consumer group offsets --------------------------------------------------------------
    async def commit_offsets(self, request: web.Request) -> web.Response:
        """POST /v1/groups/{group}/offsets {"topic", "offsets": {"<qid>": n}, "reset"}"""
        group = check_group(request.match_info["group"])
        body = await read_json_object(request, fields=COMMIT_FIELDS,
                                      settings=self._settings)
        topic = body.get("topic")
        if not isinstance(topic, str):
            raise bad_request("topic is required (a string)")
        check_topic(topic, size_bytes_max=self._topic_bytes_max)
        require(request, [need_topic(topic, Perm.SUB)])
        if "offsets" not in body:
            raise bad_request("offsets is required: {\"<queue id>\": next offset, ...}")
        offsets = offsets_of(body["offsets"], "offsets")
        reset = body.get("reset", False)
        if not isinstance(reset, bool):
            raise bad_request("reset must be true or false")
        try:
            merged = await asyncio.to_thread(self._offsets.commit, group, topic, offsets,
                                             reset=reset)
        except OffsetsLockTimeoutError as error:
            raise ServiceError(503, "OFFSETS_BUSY", str(error), headers={
                "Retry-After": str(self._settings.retry_after_s)}) from None
        except GroupsFullError as error:
            raise ServiceError(409, "GROUPS_FULL", f"{error} (groups_max)") from None
        except GroupOffsetsTooLargeError as error:
            raise ServiceError(413, "GROUP_OFFSETS_TOO_LARGE",
                               f"{error} (group_offsets_file_bytes_max)") from None
        except StoreFormatError as error:
            raise ServiceError(500, "OFFSETS_CORRUPT", str(error)) from None
        return json_response(_offsets_json(group, topic, merged))

    async def fetch_offsets(self, request: web.Request) -> web.Response:
        """GET /v1/groups/{group}/offsets?topic="""
        group = check_group(request.match_info["group"])
        if "topic" not in request.query:
            raise bad_request("the topic query parameter is required: ?topic=NAME")
        topic = check_topic(request.query["topic"], size_bytes_max=self._topic_bytes_max)
        return json_response(_offsets_json(
            group, topic, self._stored(lambda: self._offsets.fetch(group, topic))))

    async def groups(self, request: web.Request) -> web.Response:
        """GET /v1/groups: every group with committed offsets and its topics (read-only; the
        files of config/consumer-offsets/, storage/files/consumer_offsets.py)."""
        try:
            found = await asyncio.to_thread(self._offsets.groups)
        except StoreFormatError as error:
            raise ServiceError(500, "OFFSETS_CORRUPT", str(error)) from None
        return json_response({"groups": [{"group": group, "topics": topics}
                                         for group, topics in found.items()]})

    @staticmethod
    def _stored(read: Callable[[], dict[int, int]]) -> dict[int, int]:
        try:
            return read()
        except StoreFormatError as error:
            raise ServiceError(500, "OFFSETS_CORRUPT", str(error)) from None

    # -- lookups -----------------------------------------------------------------------------
    async def messages_by_key(self, request: web.Request) -> web.Response:
        """GET /v1/topics/{topic}/messages?key=&begin_ms=&end_ms=&max_messages="""
        topic = check_topic(request.match_info["topic"], size_bytes_max=self._topic_bytes_max)
        key = request.query.get("key", "")
        if not key or " " in key:
            raise bad_request("key is required: one key, without spaces")
        begin_ms = query_int(request, "begin_ms", default=0, maximum=TIMESTAMP_MS_MAX)
        end_ms = query_int(request, "end_ms", default=TIMESTAMP_MS_MAX,
                           maximum=TIMESTAMP_MS_MAX)
        results_max = self._view.config.index_query_results_max
        max_messages = query_int(request, "max_messages", minimum=1, maximum=results_max,
                                 default=results_max, setting="index_query_results_max")
        if self._view.index is None:
            raise ServiceError(501, "INDEX_DISABLED", "the index is disabled "
                               "(index_enabled=false): no lookups by key")
        found = self._view.query_by_key(topic, key, begin_ms, end_ms, max_messages)
        return json_response({"topic": topic, "key": key,
                              "messages": [message_json(message) for message in found]})

    async def offset_by_time(self, request: web.Request) -> web.Response:
        """GET /v1/topics/{topic}/queues/{queue_id}/offset-by-time?timestamp_ms="""
        topic = check_topic(request.match_info["topic"], size_bytes_max=self._topic_bytes_max)
        queue_id = queue_id_of(request.match_info["queue_id"])
        timestamp_ms = query_int(request, "timestamp_ms", maximum=TIMESTAMP_MS_MAX)
        offset = self._view.offset_by_time(topic, queue_id, timestamp_ms)
        return json_response({"topic": topic, "queue_id": queue_id,
                              "timestamp_ms": timestamp_ms, "offset": offset})

    async def message_at(self, request: web.Request) -> web.Response:
        """GET /v1/messages/{physical_offset}"""
        physical_offset = parse_int(request.match_info["physical_offset"], "physical_offset",
                                    minimum=0, maximum=OFFSET_MAX)
        try:
            message = self._view.message_at(physical_offset)
        except NotDispatchedError as error:
            raise ServiceError(404, "NOT_DISPATCHED_YET", str(error)) from None
        except NoRecordError as error:
            raise ServiceError(404, "NOT_FOUND", str(error)) from None
        except CorruptRecordError as error:
            raise ServiceError(500, GetStatus.MESSAGE_CORRUPT.value, str(error)) from None
        return json_response(message_json(message))

    async def topics(self, request: web.Request) -> web.Response:
        """GET /v1/topics"""
        return json_response({"topics": self._topic_names()})

    async def queues(self, request: web.Request) -> web.Response:
        """GET /v1/topics/{topic}/queues"""
        topic = check_topic(request.match_info["topic"], size_bytes_max=self._topic_bytes_max)
        view = self._view
        return json_response({"topic": topic, "queues": [
            {"queue_id": queue_id, "min_offset": view.min_offset(topic, queue_id),
             "max_offset": view.max_offset(topic, queue_id)}
            for queue_id in view.queue_ids(topic)]})


def _offsets_json(group: str, topic: str, offsets: dict[int, int]) -> dict[str, Any]:
    return {"group": group, "topic": topic,
            "offsets": {str(queue_id): offset for queue_id, offset in sorted(offsets.items())}}
