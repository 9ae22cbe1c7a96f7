"""The notifier's OpenAPI document, built beside its handlers and served at `/openapi.json`.

The rules live in the docstrings of the modules that implement them (pulls.py, requests.py,
storage/files/consumer_offsets.py, broker_admin.py); the document quotes them.
"""

from __future__ import annotations

import inspect
from typing import Any

from mqstore.services.common.http import openapi
from mqstore.services.common.settings.config_file import NotifierSettings, WriterSettings
from mqstore.services.notifier import pulls, requests
from mqstore.services.notifier.nacks import RECONSUME_TIMES_MAX
from mqstore.services.notifier.remoting.broker_config import PERMISSION_MAX
from mqstore.services.notifier.requests import (
    DEFAULT_MAX_MESSAGES,
    KEY_PATTERN,
    TAG_FILTER_PATTERN,
    TAG_PATTERN,
    TAGS_MAX,
    TIMESTAMP_MS_MAX,
)
from mqstore.storage import GetStatus, StoreConfig
from mqstore.storage.files import consumer_offsets as offsets_module
from mqstore.storage.files.consumer_offsets import GROUP_NAME_BYTES_MAX, OFFSET_MAX, QUEUE_ID_MAX

RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.",
                               "schema": {"type": "string"}}}
INTEGER = {"type": "integer", "minimum": 0}
OFFSET = openapi.integer_schema(maximum=OFFSET_MAX)
TIMESTAMP_MS = openapi.integer_schema(maximum=TIMESTAMP_MS_MAX)
GROUP_NAME = openapi.name_schema(size_bytes_max=GROUP_NAME_BYTES_MAX)
GROUP = {"name": "group", "in": "path", "required": True, "schema": GROUP_NAME}
QUEUE_ID = {"name": "queue_id", "in": "path", "required": True,
            "schema": openapi.integer_schema(maximum=QUEUE_ID_MAX)}

MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["topic", "queue_id", "queue_offset", "physical_offset", "msg_id",
                 "store_timestamp_ms", "born_timestamp_ms", "reconsume_times", "tags", "keys",
                 "properties", "body_base64"],
    "properties": {
        "topic": {"type": "string"}, "queue_id": INTEGER, "queue_offset": INTEGER,
        "physical_offset": INTEGER,
        "msg_id": {"type": "string", "description": "RocketMQ offset msg id."},
        "store_timestamp_ms": {"type": "integer"}, "born_timestamp_ms": {"type": "integer"},
        "reconsume_times": {**INTEGER, "description": "Times consumed before: 0, or the "
                                                      "nacks a retry copy comes after."},
        "tags": {"type": ["string", "null"]},
        "keys": {"type": "array", "items": {"type": "string"}},
        "properties": {"type": "object", "additionalProperties": {"type": "string"},
                       "description": "Every property but TAGS and KEYS."},
        "body_base64": {"type": "string"},
    },
}
MESSAGES = {"type": "array", "items": {"$ref": "#/components/schemas/Message"}}
OFFSETS = {"type": "object", "additionalProperties": INTEGER,
           "description": "Queue id (as a string) → next offset to consume."}
OFFSETS_GIVEN = {"type": "object", "additionalProperties": OFFSET,
                 "propertyNames": {"type": "string",
                                   "pattern": openapi.decimal_pattern(QUEUE_ID_MAX)},
                 "description": "Queue id (in decimal, no sign or leading zero) → next "
                                "offset to consume."}
TAGS_QUERY = {"type": "string", "pattern": TAG_FILTER_PATTERN}
TAGS_BODY = {"type": ["array", "string", "null"], "pattern": TAG_FILTER_PATTERN,
             "maxItems": TAGS_MAX, "items": {"type": "string", "pattern": f"^{TAG_PATTERN}$"}}

SUGGEST = {"type": "boolean", "description":
           "RocketMQ suggestPullingFromSlave: the newest message answered lies more than "
           "pull_from_follower_memory_ratio of the machine's memory behind the log's end "
           "(likely read from disk); a follower's notifier serves the same messages."}
PULL_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["status", "next_offset", "min_offset", "max_offset", "messages",
                 "suggest_pull_from_follower"],
    "properties": {"status": {"type": "string", "enum": [s.value for s in GetStatus]},
                   "next_offset": INTEGER, "min_offset": INTEGER, "max_offset": INTEGER,
                   "messages": MESSAGES, "suggest_pull_from_follower": SUGGEST,
                   "reason": {"type": "string", "description":
                              "MESSAGE_CORRUPT: where the damaged record is and why; the "
                              "next pull (from next_offset) goes on past it."}}}
DAMAGED = {"type": "array", "description":
           "Offsets whose record is damaged on disk (MESSAGE_CORRUPT): the poll moved past "
           "them, and names them here so a consumer never misses one silently.",
           "items": {"type": "object", "additionalProperties": False,
                     "required": ["queue_id", "offset", "reason"],
                     "properties": {"queue_id": INTEGER, "offset": INTEGER,
                                    "reason": {"type": "string"}}}}
POLL_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["group", "topic", "messages", "next_offsets", "suggest_pull_from_follower"],
    "properties": {"group": {"type": "string"}, "topic": {"type": "string"},
                   "messages": MESSAGES, "next_offsets": OFFSETS,
                   "suggest_pull_from_follower": SUGGEST, "damaged": DAMAGED}}
GROUP_OFFSETS_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["group", "topic", "offsets"],
    "properties": {"group": {"type": "string"}, "topic": {"type": "string"},
                   "offsets": OFFSETS}}


GROUPS_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["groups"],
    "properties": {"groups": {"type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": ["group", "topics"],
        "properties": {"group": {"type": "string"},
                       "topics": {"type": "array", "items": {"type": "string"}}}}}}}


NULLABLE_INTEGER = {"type": ["integer", "null"], "minimum": 0}
QUEUES_SCHEMA: dict[str, Any] = {"type": "array", "items": {
    "type": "object", "additionalProperties": False,
    "required": ["queue_id", "min_offset", "max_offset"],
    "properties": {"queue_id": INTEGER, "min_offset": INTEGER, "max_offset": INTEGER}}}
GROUP_TOPIC_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"], "additionalProperties": False,
    "required": ["topic", "queues", "messages"],
    "properties": {"topic": {"type": "string"}, "queues": QUEUES_SCHEMA,
                   "messages": {**INTEGER, "description": "max_offset - min_offset, summed "
                                                          "over the queues."}}}
RETRIES_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["groups"],
    "properties": {"groups": {"type": "array", "items": {
        "type": "object", "additionalProperties": False,
        "required": ["group", "retry", "dead_letter"],
        "properties": {"group": {"type": "string"}, "retry": GROUP_TOPIC_SCHEMA,
                       "dead_letter": GROUP_TOPIC_SCHEMA}}}}}
DELAYS_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["topic", "levels", "waiting"],
    "properties": {"topic": {"type": "string"}, "waiting": INTEGER, "levels": {
        "type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["level", "delay_ms", "queue_id", "min_offset", "max_offset",
                         "next_offset", "waiting"],
            "properties": {"level": INTEGER, "queue_id": INTEGER, "min_offset": INTEGER,
                           "max_offset": INTEGER, "waiting": INTEGER,
                           "delay_ms": {**NULLABLE_INTEGER, "description":
                                        "null: a queue past store.message_delay_levels."},
                           "next_offset": {**INTEGER, "description":
                                           "The schedule's next offset to deliver, from "
                                           "config/delayOffset.json."}}}}}}

LAST_PASS_FIELDS = ("finished_ms", "half_offset", "half_max_offset", "op_offset",
                    "op_max_offset", "waiting")
TRANSACTIONS_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["half_topic", "op_topic", "discarded_topic", "check", "last_pass"],
    "properties": {
        "half_topic": GROUP_TOPIC_SCHEMA, "op_topic": GROUP_TOPIC_SCHEMA,
        "discarded_topic": GROUP_TOPIC_SCHEMA,
        "check": {"type": "object", "additionalProperties": False,
                  "required": ["group", "half_offset", "op_offset", "pending"],
                  "properties": {"group": {"type": "string"}, "half_offset": NULLABLE_INTEGER,
                                 "op_offset": NULLABLE_INTEGER, "pending": {
                                     **INTEGER, "description": "Half queue max offset minus "
                                     "the check's progress: an upper bound, live."}}},
        "last_pass": {"type": ["object", "null"], "additionalProperties": False,
                      "required": [*LAST_PASS_FIELDS, "ops_complete"],
                      "description": "The remoting front's last check pass; null without "
                                     "the front or before its first pass.",
                      "properties": {**dict.fromkeys(LAST_PASS_FIELDS, INTEGER),
                                     "ops_complete": {"type": "boolean"}}}}}


def _retry_paths() -> dict[str, Any]:
    """GET /v1/retries and GET /v1/delays (retry_status.py), GET /v1/transactions
    (transaction_status.py)."""
    return {
        "/v1/retries": _get(
            "Each consumer group's retry and dead letter topics, with their queues and "
            "message counts.",
            [_query("group", "Only this group.", schema=GROUP_NAME)], RETRIES_SCHEMA),
        "/v1/delays": _get(
            "Each delay level's schedule queue, the schedule's next offset and the messages "
            "still waiting.", [], DELAYS_SCHEMA, extra={
                "500": openapi.error_response("config/delayOffset.json cannot be read.")}),
        "/v1/transactions": _get(
            "The half, op and discarded transaction topics, the check's progress and the "
            "halves its last pass left waiting.", [], TRANSACTIONS_SCHEMA, extra={
                "500": openapi.error_response("The check group's offsets file is corrupt.")}),
    }


def _nack_paths(topic_schema: dict[str, Any]) -> dict[str, Any]:
    """POST /v1/groups/{group}/nacks (nacks.py)."""
    level = {"type": "integer", "minimum": -1, "maximum": RECONSUME_TIMES_MAX}
    nack = {"type": "object", "additionalProperties": False,
            "required": ["topic", "queue_id", "queue_offset"], "properties": {
                "topic": topic_schema, "queue_id": QUEUE_ID["schema"], "queue_offset": OFFSET,
                "delay_level": {**level, "default": 0, "description":
                                "0: 3 + the message's reconsume times; -1: dead letter."},
                "max_reconsume_times": {**level, "minimum": 0, "description":
                                        "Default remoting.retry_max_times."}}}
    nacked = {"type": "object", "additionalProperties": False, "required": [
        "group", "topic", "queue_id", "queue_offset", "stored_in", "dead_letter",
        "reconsume_times", "delay_level", "delay_ms"], "properties": {
            "group": {"type": "string"}, "topic": {"type": "string"}, "queue_id": INTEGER,
            "queue_offset": INTEGER, "stored_in": {"type": "string"},
            "dead_letter": {"type": "boolean"}, "reconsume_times": INTEGER,
            "delay_level": INTEGER, "delay_ms": INTEGER}}
    return {"/v1/groups/{group}/nacks": _post(
        "A failed message: its copy waits in %RETRY%<group>, or goes to %DLQ%<group> past "
        "max_reconsume_times.", [GROUP], nack, nacked, extra={
            "404": openapi.error_response("NO_MESSAGE or MESSAGE_CORRUPT at that offset."),
            "503": openapi.error_response("The writer cannot take the copy now.",
                                          headers=RETRY_AFTER),
            "507": openapi.error_response("The writer's disk is full.")})}


def _query(name: str, description: str, *, required: bool = False,
           schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": description,
            "schema": schema or OFFSET}


def _get(summary: str, parameters: list[dict[str, Any]], schema: dict[str, Any], *,
         extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"get": {"summary": summary, "parameters": parameters, "responses": {
        "200": {"description": "OK.", "content": openapi.json_content(schema)},
        "400": openapi.error_response("A parameter breaks its rule; the reason names it."),
        **(extra or {})}}}


def _post(summary: str, parameters: list[dict[str, Any]], body: dict[str, Any],
          schema: dict[str, Any], *, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"post": {"summary": summary, "parameters": parameters,
                     "requestBody": {"required": True, "content": openapi.json_content(body)},
                     "responses": {
                         "200": {"description": "OK.", "content": openapi.json_content(schema)},
                         "400": openapi.error_response("Junk JSON, a wrong field or value; "
                                                       "nothing was changed."),
                         "415": openapi.error_response("Content-Type is not JSON."),
                         **(extra or {})}}}


def _topic_admin(topic: dict[str, Any], *, queue_count_max: int) -> dict[str, Any]:
    """PUT and DELETE /v1/topics/{topic} (topic_admin.py): no request body."""
    queue_count = _query("queue_count", "The topic's read and write queue count "
                         "(1..writer.topic_queue_count; default: all of them).",
                         schema={**openapi.integer_schema(minimum=1, maximum=queue_count_max),
                                 "default": queue_count_max})
    def answer(properties: dict[str, Any]) -> dict[str, Any]:
        return {"description": "OK.", "content": openapi.json_content({
            "type": "object", "additionalProperties": False, "required": list(properties),
            "properties": properties})}

    bad_name = openapi.error_response("The topic name breaks its rule.")
    return {
        "put": {"summary": "Create a topic (idempotent) with queue_count queues: writable "
                           "even with topics.auto_create off.",
                "parameters": [topic, queue_count], "responses": {
                    "200": answer({"topic": {"type": "string"}, "queue_count": INTEGER}),
                    "400": openapi.error_response("The topic name or queue_count breaks its "
                                                  "rule."),
                    "403": openapi.error_response("NO_PERMISSION: a system topic."),
                    "409": openapi.error_response("The table holds topics.topics_max topics "
                                                  "already.")}},
        "delete": {"summary": "Delete a topic: the writer refuses produces to it within "
                              "topics.topics_file_check_interval_ms; its data stays until "
                              "retention takes it.",
                   "parameters": [topic], "responses": {
                       "200": answer({"topic": {"type": "string"},
                                      "deleted": {"type": "boolean"}}),
                       "400": bad_name,
                       "404": openapi.error_response("TOPIC_NOT_EXIST: no such topic (or a "
                                                     "system topic).")}}}


def _broker_paths() -> dict[str, Any]:
    """GET /v1/broker and PUT /v1/broker/permission (broker_admin.py)."""
    permission = {**openapi.integer_schema(maximum=PERMISSION_MAX),
                  "description": "brokerPermission: 2 write, 4 read, 6 both."}
    answer = {"type": "object", "additionalProperties": False, "required": list(names := {
        "cluster_name": {"type": "string"}, "broker_name": {"type": "string"},
        "permission": permission}), "properties": names}
    body = {"type": "object", "additionalProperties": False, "required": ["permission"],
            "properties": {"permission": permission}}
    return {"/v1/broker": _get("The group's cluster and broker names, its permission.", [],
                               answer),
            "/v1/broker/permission": {"put": _post(
                "Set brokerPermission as mqadmin updateBrokerConfig does (4: read only, to "
                "drain the group; 6: serve sends again).", [], body, answer)["post"]}}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _pull_paths(topic: dict[str, Any], settings: NotifierSettings) -> dict[str, Any]:
    """The pull and the group poll, with the bounds of `settings`."""
    busy = {"503": openapi.error_response("Too many held pulls (held_requests_max); retry.",
                                          headers=RETRY_AFTER)}
    max_messages = {**openapi.integer_schema(minimum=1, maximum=settings.pull_messages_max),
                    "default": min(DEFAULT_MAX_MESSAGES, settings.pull_messages_max)}
    wait_ms = {**openapi.integer_schema(maximum=settings.pull_wait_ms_max), "default": 0}
    wait = _query("wait_ms", "Hold the pull up to this long while caught up "
                  "(0..pull_wait_ms_max; default 0).", schema=wait_ms)
    pull_body = {"type": "object", "additionalProperties": False, "properties": {
        "max_messages": max_messages, "wait_ms": wait_ms, "tags": TAGS_BODY,
        "offsets": {**OFFSETS_GIVEN, "description": "Where the caller has read to (its "
                    "uncommitted progress); other queues start at the committed offset."}}}
    return {
        "/v1/topics/{topic}/queues/{queue_id}/messages": _get(
            "Pull one queue from an offset, with long polling.",
            [topic, QUEUE_ID, _query("offset", "Queue offset to read from.", required=True),
             _query("max_messages", "1..pull_messages_max (default 32, or "
                    "pull_messages_max if lower).", schema=max_messages), wait,
             _query("tags", 'Tag filter: "a||b"; "*" or absent: all.', schema=TAGS_QUERY)],
            _ref("Pull"), extra=busy),
        "/v1/groups/{group}/topics/{topic}/poll": _post(
            "Poll a topic's queues for a consumer group, with long polling.", [GROUP, topic],
            pull_body, _ref("Poll"), extra=busy),
    }


def _paths(config: StoreConfig, settings: NotifierSettings, *,
           queue_count_max: int) -> dict[str, Any]:
    """The routes, with the bounds of `config` (topic names, lookups), `settings` and the
    writer's `queue_count_max` (topic_queue_count)."""
    topic_schema = openapi.name_schema(size_bytes_max=config.topic_size_bytes_max)
    topic = {"name": "topic", "in": "path", "required": True, "schema": topic_schema}
    commit_body = {"type": "object", "additionalProperties": False,
                   "required": ["topic", "offsets"], "properties": {
                       "topic": topic_schema, "offsets": OFFSETS_GIVEN,
                       "reset": {"type": "boolean", "default": False, "description":
                                 "Replace the stored offsets (may move them back)."}}}
    return {
        **_pull_paths(topic, settings),
        **_retry_paths(),
        **_nack_paths(topic_schema),
        **_broker_paths(),
        "/v1/topics/{topic}": _topic_admin(topic, queue_count_max=queue_count_max),
        "/v1/groups/{group}/offsets": {
            **_post("Commit a group's offsets on a topic (never backwards unless reset).",
                    [GROUP], commit_body, _ref("GroupOffsets"), extra={
                        "500": openapi.error_response("The offsets file is corrupt."),
                        "503": openapi.error_response("Another commit of the group held its "
                                                      "lock too long.", headers=RETRY_AFTER)}),
            **_get("A group's committed offsets on a topic.",
                   [GROUP, _query("topic", "The topic.", required=True, schema=topic_schema)],
                   _ref("GroupOffsets"))},
        "/v1/topics/{topic}/messages": _get(
            "Messages of a topic with a key (exact), stored in [begin_ms, end_ms].",
            [topic, _query("key", "One key (no spaces).", required=True,
                           schema={"type": "string", "pattern": KEY_PATTERN}),
             _query("begin_ms", "Default 0.", schema=TIMESTAMP_MS),
             _query("end_ms", "Default: no end.", schema=TIMESTAMP_MS),
             _query("max_messages", "1..index_query_results_max.",
                    schema=openapi.integer_schema(minimum=1,
                                                  maximum=config.index_query_results_max))],
            {"type": "object", "required": ["topic", "key", "messages"],
             "properties": {"topic": {"type": "string"}, "key": {"type": "string"},
                            "messages": MESSAGES}},
            extra={"501": openapi.error_response("The index is disabled.")}),
        "/v1/topics/{topic}/queues/{queue_id}/offset-by-time": _get(
            "The first queue offset stored at or after a time (max offset if none).",
            [topic, QUEUE_ID, _query("timestamp_ms", "Epoch milliseconds.", required=True,
                                     schema=TIMESTAMP_MS)],
            {"type": "object", "required": ["topic", "queue_id", "timestamp_ms", "offset"],
             "properties": {"topic": {"type": "string"}, "queue_id": INTEGER,
                            "timestamp_ms": INTEGER, "offset": INTEGER}}),
        "/v1/messages/{physical_offset}": _get(
            "The message whose record starts at a commit log position.",
            [{"name": "physical_offset", "in": "path", "required": True, "schema": OFFSET}],
            _ref("Message"),
            extra={"404": openapi.error_response("No record starts there (or it is gone)."),
                   "500": openapi.error_response(
                       "MESSAGE_CORRUPT: the record there is damaged (its body fails its "
                       "CRC); it is never served.")}),
        "/v1/groups": _get("Every consumer group with committed offsets, with the topics "
                           "it committed on.", [], GROUPS_SCHEMA, extra={
                               "500": openapi.error_response("An offsets file is corrupt.")}),
        "/v1/topics": _get("The topics created or with consume queues, less the deleted.", [], {
            "type": "object", "required": ["topics"],
            "properties": {"topics": {"type": "array", "items": {"type": "string"}}}}),
        "/v1/topics/{topic}/queues": _get("A topic's queues with their min and max offsets.",
                                          [topic], {
            "type": "object", "required": ["topic", "queues"], "properties": {
                "topic": {"type": "string"}, "queues": {"type": "array", "items": {
                    "type": "object", "required": ["queue_id", "min_offset", "max_offset"],
                    "properties": {"queue_id": INTEGER, "min_offset": INTEGER,
                                   "max_offset": INTEGER}}}}}),
    }


def notifier_openapi(config: StoreConfig, settings: NotifierSettings, *,
                     queue_count_max: int = WriterSettings().topic_queue_count
                     ) -> dict[str, Any]:
    """The document for a notifier reading with `config` and running with `settings`, whose
    topics have at most `queue_count_max` queues (the writer's topic_queue_count)."""
    description = "\n\n".join(inspect.cleandoc(module.__doc__ or "")
                              for module in (pulls, requests, offsets_module))
    return openapi.document(
        title="mqstore pull-notifier", version="1",
        description="Serves consumers from the volume: pulls with long polling, consumer "
                    "group offsets, lookups.\n\n" + description,
        paths=_paths(config, settings, queue_count_max=queue_count_max),
        schemas={"Message": MESSAGE_SCHEMA, "Pull": PULL_SCHEMA, "Poll": POLL_SCHEMA,
                 "GroupOffsets": GROUP_OFFSETS_SCHEMA})
