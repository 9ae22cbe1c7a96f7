"""Send results, and reading the writer's answers (shared by the sync and async producers)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mqstore.client.errors import (
    BadRequestError,
    DiskFullError,
    MqstoreError,
    ServerError,
    UnavailableError,
)
from mqstore.services.common.http.batch_wire import ResultCodec, WireFormatError, msg_id

SUCCESS_HTTP_STATUSES = (200, 202)


class SendResult:
    """Where one message was stored.  Read-only by convention; `msg_id` is computed on
    first use (a batch of 256 results would otherwise spend more on hex than on reading)."""

    __slots__ = ("_msg_id", "_store_host_packed", "physical_offset", "queue_id", "queue_offset",
                 "reason", "status", "store_timestamp_ms")

    def __init__(self, status: str, queue_id: int, queue_offset: int, physical_offset: int,
                 store_timestamp_ms: int, *, msg_id: str = "", store_host_packed: bytes = b"",
                 reason: str = "") -> None:
        assert msg_id or store_host_packed, "a result needs its msg id or the store host"
        self.status = status
        """PUT_OK, or FLUSH_DISK_TIMEOUT: stored but its sync was not confirmed (HTTP 202)."""
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.physical_offset = physical_offset
        self.store_timestamp_ms = store_timestamp_ms
        self.reason = reason
        self._msg_id = msg_id
        self._store_host_packed = store_host_packed

    @property
    def msg_id(self) -> str:
        """RocketMQ's offset msg id: hex of store host + physical offset."""
        if not self._msg_id:
            self._msg_id = msg_id(self._store_host_packed, self.physical_offset)
        return self._msg_id

    @property
    def ok(self) -> bool:
        """Stored, and synced when the writer runs sync flush."""
        return self.status == "PUT_OK"

    def __repr__(self) -> str:
        return (f"SendResult({self.status}, msg_id={self.msg_id}, queue_id={self.queue_id}, "
                f"queue_offset={self.queue_offset}, physical_offset={self.physical_offset})")


def result_from_json(document: Mapping[str, Any]) -> SendResult:
    return SendResult(document["status"], document["queue_id"], document["queue_offset"],
                      document["physical_offset"], document["store_timestamp_ms"],
                      msg_id=document["msg_id"], reason=document.get("reason", ""))


def results_from_binary(body: bytes) -> list[SendResult]:
    try:
        host, rows = ResultCodec.decode_fields(body)
    except WireFormatError as error:
        raise ServerError(f"unreadable batch result: {error}") from None
    return [SendResult(*row, store_host_packed=host) for row in rows]


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
