"""Building blocks of each service's OpenAPI 3.1 document (served at `/openapi.json`).

Each service builds its document in code beside its handlers (`services/<name>/openapi.py`)
from these pieces; `tests/services/test_writer_openapi.py` checks that the document and the
router list the same routes and that real responses match the documented schemas.
Schemas are JSON Schema 2020-12, as OpenAPI 3.1 uses it.

A document is exactly as strict as the server's checks: every request the schemas allow is
one the server takes, except where only the server's state or a sum over several fields can
decide (an unknown physical offset, the encoded size of all properties together); those
refusals are named in the operation's responses.  Bounds that come from settings are read
from the settings the service runs with, so each service serves its own document.
`tests/services/test_openapi_fuzz.py` sends generated schema-valid requests to each service
and `tests/services/test_openapi_strict.py` holds the document to each rule.
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

LEGAL_NAME_PATTERN = "^[%|a-zA-Z0-9_-]+$"
"""Topic and group names: RocketMQ's `^[%|a-zA-Z0-9_-]+$` (storage/format/topic.py)."""

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}
READY_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["status", "pid"], "properties": {
        "status": {"type": "string"},
        "pid": {"type": "integer", "minimum": 1, "description":
                "The answering process: `mqstore up` checks that its own child answered."}}}


def name_schema(*, size_bytes_max: int, reserved: tuple[str, ...] = ()) -> dict[str, Any]:
    """A topic or group name of at most `size_bytes_max` bytes (ASCII: characters), none of
    `reserved`."""
    schema: dict[str, Any] = {"type": "string", "pattern": LEGAL_NAME_PATTERN,
                              "minLength": 1, "maxLength": size_bytes_max}
    if reserved:
        schema["not"] = {"enum": list(reserved)}
    return schema


def integer_schema(*, minimum: int = 0, maximum: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def decimal_pattern(maximum: int) -> str:
    """A pattern for the canonical decimal spellings of 0..`maximum` (no sign, no leading
    zeros): JSON object keys are strings, so a map keyed by queue id bounds its keys so."""
    assert maximum >= 0
    digits = str(maximum)
    if len(digits) == 1:
        return f"^[0-{maximum}]$"
    # shorter than `maximum`: any number; as long: equal to its first digits, lower at the
    # next one, anything after; or `maximum` itself
    options = ["0", "[1-9]"] + [f"[1-9][0-9]{{{width - 1}}}" for width in range(2, len(digits))]
    for index, digit in enumerate(digits):
        lowest = 1 if index == 0 else 0
        if int(digit) - 1 >= lowest:
            rest = len(digits) - index - 1
            options.append(digits[:index] + f"[{lowest}-{int(digit) - 1}]" +
                           (f"[0-9]{{{rest}}}" if rest else ""))
    options.append(digits)
    return "^(" + "|".join(options) + ")$"


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
                "200": {"description": "Ready.", "content": json_content(READY_SCHEMA)},
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
