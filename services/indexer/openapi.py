"""The indexer's OpenAPI document, served at `/openapi.json`."""

from __future__ import annotations

from typing import Any

from mqstore.services.common.http import openapi

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["dispatched_position", "synced_position", "dispatch_behind_bytes",
                 "writer_generation", "writer_committed_position", "failure",
                 "stalled_reason", "stalled_queues"],
    "properties": {
        "dispatched_position": {"type": "integer"},
        "synced_position": {"type": "integer", "description":
                            "Every record below it has its consume queue entry on disk."},
        "dispatch_behind_bytes": {"type": "integer", "minimum": 0},
        "writer_generation": {"type": "integer"},
        "writer_committed_position": {"type": ["integer", "null"]},
        "failure": {"type": ["string", "null"]},
        "stalled_reason": {"type": ["string", "null"], "description":
                           "Why dispatch waits (no disk space for a new file; it retries)."},
        "stalled_queues": {"type": "array", "description":
                           "Queues an error of their own files stalled; dispatch goes on with "
                           "the others and puts their records again every "
                           "stalled_queue_retry_interval_ms.", "items": {
                               "type": "object",
                               "required": ["topic", "queue_id", "queue_offset",
                                            "physical_offset", "reason"],
                               "properties": {
                                   "topic": {"type": "string"},
                                   "queue_id": {"type": "integer"},
                                   "queue_offset": {"type": "integer", "description":
                                                    "The first offset it could not take."},
                                   "physical_offset": {"type": "integer"},
                                   "reason": {"type": "string"}}}},
    },
}


def indexer_openapi() -> dict[str, Any]:
    paths = {
        "/v1/notices": {"get": {
            "summary": "Stream of queue-advanced notices (NDJSON), for the notifiers.",
            "description": "First line: {\"type\": \"snapshot\", \"queues\": [[topic, queue_id, "
                           "min_offset, max_offset], ...]}; then {\"type\": \"advanced\", "
                           "\"queues\": [[topic, queue_id, next_offset], ...]} and "
                           "{\"type\": \"heartbeat\"} lines.",
            "responses": {"200": {"description": "The stream.", "content": {
                "application/x-ndjson": {"schema": {"type": "string"}}}}}}},
        "/v1/status": {"get": {
            "summary": "Dispatch position, lag and the writer generation followed.",
            "responses": {"200": {"description": "Status.", "content": openapi.json_content(
                {"$ref": "#/components/schemas/IndexerStatus"})}}}},
    }
    return openapi.document(title="mqstore reput/indexer", version="1",
                            description="Builds consume queues and the index from the "
                                        "commit log and streams notices to the notifiers.",
                            paths=paths, schemas={"IndexerStatus": STATUS_SCHEMA})
