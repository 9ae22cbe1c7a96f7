"""Send results, and reading the writer's answers (shared by the sync and async producers)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from mqstore.services.common.wire import ResultCodec, WireFormatError, msg_id

from .errors import (
    BadRequestError,
    DiskFullError,
    MqstoreError,
    ServerError,
    UnavailableError,
)

SUCCESS_HTTP_STATUSES = (200, 202)


@dataclasses.dataclass(frozen=True, slots=True)
class SendResult:
    """Where one message was stored."""

    status: str
    """PUT_OK, or FLUSH_DISK_TIMEOUT: stored but its sync was not confirmed (HTTP 202)."""
    msg_id: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    store_timestamp_ms: int
    reason: str = ""

    @property
    def ok(self) -> bool:
        """Stored, and synced when the writer runs sync flush."""
        return self.status == "PUT_OK"


def result_from_json(document: Mapping[str, Any]) -> SendResult:
    return SendResult(status=document["status"], msg_id=document["msg_id"],
                      queue_id=document["queue_id"], queue_offset=document["queue_offset"],
                      physical_offset=document["physical_offset"],
                      store_timestamp_ms=document["store_timestamp_ms"],
                      reason=document.get("reason", ""))


def results_from_binary(body: bytes) -> list[SendResult]:
    try:
        host, rows = ResultCodec.decode(body)
    except WireFormatError as error:
        raise ServerError(f"unreadable batch result: {error}") from None
    return [SendResult(row.status, msg_id(host, row.physical_offset), row.queue_id,
                       row.queue_offset, row.physical_offset, row.store_timestamp_ms)
            for row in rows]


def error_for(http_status: int, body: bytes) -> MqstoreError:
    """The exception for an answer that stored nothing."""
    status, reason = _error_fields(body)
    if 400 <= http_status < 500:
        return BadRequestError(reason, http_status=http_status, status=status)
    if http_status == 503:
        return UnavailableError(reason, http_status=http_status, status=status)
    if http_status == 507:
        return DiskFullError(reason, http_status=http_status, status=status)
    return ServerError(reason, http_status=http_status, status=status)


def _error_fields(body: bytes) -> tuple[str, str]:
    """(status, reason) of the uniform error body, or a summary of whatever came instead."""
    try:
        error = json.loads(body)["error"]
        return str(error["status"]), str(error["reason"])
    except (ValueError, KeyError, TypeError):
        return "", f"unexpected answer body: {body[:200]!r}"


def retry_after_s(value: str | None) -> float | None:
    """Retry-After in seconds (the delay form; an HTTP date is ignored)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
