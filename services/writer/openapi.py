"""The writer's OpenAPI document, built beside its handlers and served at `/openapi.json`.

The binary layouts are documented once, in `batch_wire.BatchCodec` and
`batch_wire.ResultCodec`; their docstrings are the descriptions here.
"""

from __future__ import annotations

import inspect
from typing import Any

from mqstore.services.common.http import openapi
from mqstore.services.common.http.batch_wire import (
    BATCH_MEDIA_TYPE,
    RESULT_MEDIA_TYPE,
    STATUS_NAMES,
    BatchCodec,
    ResultCodec,
)
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import replication_status, statuses
from mqstore.services.writer.requests import (
    BASE64_PATTERN,
    KEY_PATTERN,
    RESERVED_PROPERTIES,
    TEXT_PATTERN,
)
from mqstore.storage import StoreConfig
from mqstore.storage.format.padding import PADDING_TOPIC

RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.",
                               "schema": {"type": "string"}}}

def message_schema(config: StoreConfig, settings: WriterSettings) -> dict[str, Any]:
    """A JSON message as `requests.wire_message_from_json` and `ProduceCore.check` take it."""
    body_max = config.message_body_size_bytes_max
    text = {"type": "string", "pattern": TEXT_PATTERN}
    return {
        "type": "object",
        "additionalProperties": False,
        "description": "Exactly one of body and body_base64.  Sums no schema can bound: the "
                       "properties (with tags and keys) encode to at most "
                       f"{config.properties_size_bytes_max} bytes "
                       "(store.properties_size_bytes_max, else 400 MESSAGE_ILLEGAL) and the "
                       f"bodies of one request total at most {config.put_batch_size_bytes_max}"
                       " bytes (put_batch_size_bytes_max, else 413).",
        "oneOf": [{"required": ["body"]}, {"required": ["body_base64"]}],
        "properties": {
            "body": {"type": "string", "minLength": 1, "maxLength": body_max, "description":
                     f"The body as UTF-8 text: 1..{body_max} bytes encoded "
                     "(message_body_size_bytes_max; the bytes decide, 413 over)."},
            "body_base64": {"type": "string", "pattern": BASE64_PATTERN,
                            "maxLength": 4 * -(-body_max // 3),
                            "description": "The body, base64 (binary bodies): 1.."
                                           f"{body_max} bytes decoded."},
            "queue_id": {"type": ["integer", "null"], "minimum": 0,
                         "maximum": settings.topic_queue_count - 1, "description":
                         "0..topic_queue_count-1; null or absent: the writer chooses (round "
                         "robin)."},
            "tags": {"type": ["string", "null"], "pattern": TEXT_PATTERN},
            "keys": {"type": "array", "items": {"type": "string", "pattern": KEY_PATTERN},
                     "description": "Lookup keys (no spaces), indexed for queries by key."},
            "properties": {"type": ["object", "null"], "additionalProperties": text,
                           "propertyNames": {**text, "not": {"enum": sorted(
                               RESERVED_PROPERTIES)}},
                           "description": "User properties (not TAGS or KEYS)."},
        },
    }


PUT_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["status", "msg_id", "queue_id", "queue_offset", "physical_offset",
                 "store_timestamp_ms"],
    "properties": {
        "status": {"type": "string", "enum": ["PUT_OK", "FLUSH_DISK_TIMEOUT",
                                              "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"]},
        "msg_id": {"type": "string", "description":
                   "RocketMQ offset msg id: hex of store host + physical offset."},
        "queue_id": {"type": "integer"},
        "queue_offset": {"type": "integer"},
        "physical_offset": {"type": "integer"},
        "store_timestamp_ms": {"type": "integer"},
        "reason": {"type": "string", "description": "Present with every status but PUT_OK."},
    },
}

PUT_RESULTS_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["results"],
    "properties": {"results": {"type": "array",
                               "items": {"$ref": "#/components/schemas/PutResult"}}}}


def _refusals() -> dict[str, Any]:
    ref = openapi.error_response
    return {
        "400": ref("Bad request (malformed body, wrong types) or an illegal message; "
                   "nothing was stored."),
        "413": ref("Request, a body, or a batch's bodies over their bounds; nothing stored."),
        "403": ref("This writer is a follower (store.role=follower): it takes no produce "
                   "requests; the reason names its master (SERVICE_NOT_AVAILABLE)."),
        "415": ref("Wrong Content-Type."),
        "500": ref("A segment could not be created (CREATE_MAPPED_FILE_FAILED)."),
        "503": ref("Busy (OS_PAGECACHE_BUSY: put lock or pool exhausted; SYSTEM_BUSY: "
                   "put_requests_in_flight_max requests in flight) or the store stopped; "
                   "retry after Retry-After.", headers=RETRY_AFTER),
        "507": ref("Disk full: retention refuses writes until it frees space."),
    }


def _put(summary: str, request: dict[str, Any], ok: dict[str, Any],
         parameters: list[dict[str, Any]]) -> dict[str, Any]:
    return {"post": {
        "summary": summary,
        "parameters": parameters,
        "requestBody": {"required": True, "content": request},
        "responses": {
            "200": {"description": "Stored (and synced, under sync flush).", "content": ok},
            "202": {"description": "Written and readable here, but not confirmed: "
                                   "FLUSH_DISK_TIMEOUT (the sync was not seen in time), "
                                   "FLUSH_SLAVE_TIMEOUT (no follower confirmed it in time) or "
                                   "SLAVE_NOT_AVAILABLE (no follower close enough to).",
                    "content": ok},
            **_refusals(),
        }}}


def _replication_path() -> dict[str, Any]:
    position = {"type": "integer", "minimum": 0}
    nullable_position = {"type": ["integer", "null"], "minimum": 0}
    follower = {"type": "object", "additionalProperties": False, "required": [
        "name", "confirmed_position", "lag_bytes", "connected_at_ms", "confirmed_at_ms"],
        "properties": {"name": {"type": "string"}, "confirmed_position": position,
                       "lag_bytes": position, "connected_at_ms": position,
                       "confirmed_at_ms": position}}
    master = {"type": "object", "additionalProperties": False,
              "required": ["role", "written_position", "replicated_position",
                           "followers_in_sync", "followers"],
              "properties": {"role": {"enum": ["async_master", "sync_master"]},
                             "written_position": position, "replicated_position": position,
                             "followers_in_sync": position,
                             "followers": {"type": "array", "items": follower}}}
    follower_side = {
        "type": "object", "additionalProperties": False,
        "required": ["role", "master", "connected", "written_position", "master_position",
                     "lag_bytes", "connected_at_ms", "last_frame_at_ms",
                     "bytes_received_total", "connections_total", "last_error"],
        "properties": {"role": {"enum": ["follower"]}, "master": {"type": "string"},
                       "connected": {"type": "boolean"}, "written_position": position,
                       "master_position": nullable_position, "lag_bytes": nullable_position,
                       "connected_at_ms": position, "last_frame_at_ms": position,
                       "bytes_received_total": position, "connections_total": position,
                       "last_error": {"type": ["string", "null"]}}}
    return {"get": {
        "summary": "Replication: a master's followers and their lag in bytes, or a "
                   "follower's master connection.",
        "description": inspect.cleandoc(replication_status.__doc__ or ""),
        "responses": {"200": {"description": "The role's status.", "content":
                              openapi.json_content({"oneOf": [master, follower_side]})}}}}


def writer_openapi(config: StoreConfig, settings: WriterSettings) -> dict[str, Any]:
    """The document for a writer running with `config` and `settings` (their bounds)."""
    topic = [{"name": "topic", "in": "path", "required": True, "schema": openapi.name_schema(
        size_bytes_max=config.topic_size_bytes_max, reserved=(PADDING_TOPIC,))}]
    results = openapi.json_content({"$ref": "#/components/schemas/PutResults"})
    paths = {
        "/v1/topics/{topic}/messages": _put(
            "Store one message.",
            openapi.json_content({"$ref": "#/components/schemas/Message"}),
            openapi.json_content({"$ref": "#/components/schemas/PutResult"}), topic),
        "/v1/topics/{topic}/messages/batch": _put(
            "Store a batch of messages of one topic (all or nothing).",
            openapi.json_content({"type": "object", "additionalProperties": False,
                                  "required": ["messages"], "properties": {"messages": {
                                      "type": "array", "minItems": 1,
                                      "maxItems": settings.batch_messages_max,
                                      "items": {"$ref": "#/components/schemas/Message"}}}}),
            results, topic),
        "/v1/batch": _put(
            "Store a binary batch, possibly of several topics (all or nothing).  Results are "
            f"JSON unless Accept names {RESULT_MEDIA_TYPE}.",
            {BATCH_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary",
                                           "description": inspect.cleandoc(
                                               BatchCodec.__doc__ or "")}}},
            {**results, RESULT_MEDIA_TYPE: {"schema": {
                "type": "string", "format": "binary",
                "description": inspect.cleandoc(ResultCodec.__doc__ or "") +
                "\n\nStatus codes: " + ", ".join(
                    f"{code} {name}" for code, name in enumerate(STATUS_NAMES))}}},
            []),
        "/v1/replication": _replication_path(),
    }
    return openapi.document(
        title="mqstore commitlog-writer", version="1",
        description="Appends messages to the commit log.\n\n" + inspect.cleandoc(
            statuses.__doc__ or ""),
        paths=paths,
        schemas={"Message": message_schema(config, settings), "PutResult": PUT_RESULT_SCHEMA,
                 "PutResults": PUT_RESULTS_SCHEMA})
