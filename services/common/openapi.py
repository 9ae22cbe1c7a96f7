"""Building blocks of each service's OpenAPI 3.1 document (served at `/openapi.json`).

Each service builds its document in code beside its handlers (`services/<name>/openapi.py`)
from these pieces; `tests/services/test_writer_openapi.py` checks that the document and the
router list the same routes and that real responses match the documented schemas.
Schemas are JSON Schema 2020-12, as OpenAPI 3.1 uses it.
"""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {"error": {
        "type": "object",
        "required": ["status", "reason"],
        "additionalProperties": False,
        "properties": {
            "status": {"type": "string", "description":
                       "The store's status name (MESSAGE_ILLEGAL, OS_PAGECACHE_BUSY, ...) or "
                       "the HTTP status name (NOT_FOUND, REQUEST_ENTITY_TOO_LARGE, ...)."},
            "reason": {"type": "string", "description": "What went wrong, for humans."},
        },
    }},
}

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def error_response(description: str, *, headers: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description,
                                "content": json_content({"$ref": "#/components/schemas/Error"})}
    if headers:
        response["headers"] = headers
    return response


def common_paths() -> dict[str, Any]:
    """The probe, metrics and document routes every service has (`http.add_common_routes`)."""
    return {
        "/healthz": {"get": {
            "summary": "Liveness: 200 while the process runs.",
            "responses": {"200": {"description": "Alive.", "content": json_content(
                STATUS_SCHEMA)}}}},
        "/readyz": {"get": {
            "summary": "Readiness: 200 when the service can do its work.",
            "responses": {
                "200": {"description": "Ready.", "content": json_content(STATUS_SCHEMA)},
                "503": error_response("Not ready (starting, stopping, or the store failed)."),
            }}},
        "/metrics": {"get": {
            "summary": "Prometheus text exposition.",
            "responses": {"200": {"description": "Metrics.", "content": {
                "text/plain": {"schema": {"type": "string"}}}}}}},
        "/openapi.json": {"get": {
            "summary": "This document.",
            "responses": {"200": {"description": "The OpenAPI document.",
                                  "content": json_content({"type": "object"})}}}},
    }


SECURITY_SCHEME: dict[str, Any] = {
    "type": "apiKey", "in": "header", "name": "X-Mqstore-Signature",
    "description": "With `auth.users_file` set: a signed request, four headers "
                   "(X-Mqstore-Access-Key, X-Mqstore-Timestamp-Ms, X-Mqstore-Content-Sha256, "
                   "X-Mqstore-Signature = Base64 HMAC-SHA256 with the account's secret key); "
                   "docs/http-api.md#authentication.  Without a users file nothing is asked."}
AUTH_RESPONSES: dict[str, Any] = {
    "401": error_response("No credentials, an unknown access key, a stale timestamp, or a "
                          "signature or body hash that does not match (UNAUTHORIZED).",
                          headers={"WWW-Authenticate": {"schema": {"type": "string"}}}),
    "403": error_response("The account lacks what the route needs (FORBIDDEN)."),
}


def document(*, title: str, version: str, description: str, paths: dict[str, Any],
             schemas: dict[str, Any]) -> dict[str, Any]:
    """A whole OpenAPI document: the service's paths plus the common ones.  The service's
    operations need the signature and may answer 401/403; the common ones are open."""
    overlap = set(paths) & set(common_paths())
    assert not overlap, f"service paths shadow common ones: {overlap}"
    secured = {path: {method: {**operation, "responses": {
        **AUTH_RESPONSES, **operation.get("responses", {})}}
        for method, operation in item.items()} for path, item in paths.items()}
    open_paths = {path: {method: {**operation, "security": []}
                         for method, operation in item.items()}
                  for path, item in common_paths().items()}
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version, "description": description},
        "paths": {**secured, **open_paths},
        "security": [{"MqstoreSignature": []}],
        "components": {"schemas": {"Error": ERROR_SCHEMA, **schemas},
                       "securitySchemes": {"MqstoreSignature": SECURITY_SCHEME}},
    }
