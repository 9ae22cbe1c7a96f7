"""Put statuses to HTTP answers.

| store status                   | HTTP | why                                                  |
|--------------------------------|------|------------------------------------------------------|
| PUT_OK                         | 200  | stored (synced too under sync flush)                 |
| FLUSH_DISK_TIMEOUT             | 202  | written and readable, but its sync was not seen in    |
|                                |      | `sync_flush_timeout_ms`: durability NOT confirmed     |
| MESSAGE_ILLEGAL                | 400  | the message breaks a rule; the reason says which      |
| OS_PAGECACHE_BUSY              | 503  | put lock busy or no free pool buffer: back-pressure,  |
|                                |      | with Retry-After                                      |
| SERVICE_NOT_AVAILABLE, store   | 503  | stopped after a failed sync, or closing: with         |
| failed or closed               |      | Retry-After (a restarted writer may take it)          |
| SERVICE_NOT_AVAILABLE, else    | 507  | disk full: retention refuses writes above             |
|                                |      | `disk_warning_ratio`, or a segment hit ENOSPC         |
| CREATE_MAPPED_FILE_FAILED      | 500  | a segment could not be made or mapped in time (the    |
|                                |      | engine reports ENOSPC/EDQUOT as disk full, above)     |

SERVICE_NOT_AVAILABLE has exactly three causes in the engine (closed, failed sync, full
disk; see `MessageStore._update_refusal` and `CommitLog._start_segment`), so "neither failed
nor closed" means the disk is full.
"""

from __future__ import annotations

from mqstore.services.common.http import ServiceError
from mqstore.services.common.wire import STATUS_NAMES
from mqstore.storage import MessageStore, PutStatus

assert {status.value for status in PutStatus} == set(STATUS_NAMES), \
    "the wire's status codes must cover every PutStatus"

SUCCESS_HTTP_STATUS = {PutStatus.PUT_OK: 200, PutStatus.FLUSH_DISK_TIMEOUT: 202}


def refusal(status: PutStatus, reason: str, *, store: MessageStore,
            retry_after_s: int) -> ServiceError:
    """The error answer for a put that stored nothing."""
    assert status not in SUCCESS_HTTP_STATUS, status
    retry = {"Retry-After": str(retry_after_s)}
    if status is PutStatus.MESSAGE_ILLEGAL:
        return ServiceError(400, status.value, reason)
    if status is PutStatus.OS_PAGECACHE_BUSY:
        return ServiceError(503, status.value, reason, headers=retry)
    if status is PutStatus.SERVICE_NOT_AVAILABLE:
        if store.failure is not None or store.closed:
            return ServiceError(503, status.value, reason, headers=retry)
        return ServiceError(507, status.value, reason)
    assert status is PutStatus.CREATE_MAPPED_FILE_FAILED, status
    return ServiceError(500, status.value, reason)
