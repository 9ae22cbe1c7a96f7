"""Put statuses to HTTP answers.

| store status                   | HTTP | why                                                  |
|--------------------------------|------|------------------------------------------------------|
| PUT_OK                         | 200  | stored (synced too under sync flush)                 |
| FLUSH_DISK_TIMEOUT             | 202  | written and readable, but its sync was not seen in    |
|                                |      | `sync_flush_timeout_ms`: durability NOT confirmed     |
| FLUSH_SLAVE_TIMEOUT            | 202  | sync master: written and readable here, but no        |
|                                |      | follower confirmed it in                              |
|                                |      | `replication_sync_timeout_ms`: NOT replicated         |
| SLAVE_NOT_AVAILABLE            | 202  | sync master: written and readable here, but no        |
|                                |      | follower was connected within                         |
|                                |      | `replication_lag_bytes_max`: NOT replicated           |
| (a follower's writer)          | 403  | SERVICE_NOT_AVAILABLE: followers take no produce      |
|                                |      | requests; the reason names the master                 |
| MESSAGE_ILLEGAL                | 400  | the message breaks a rule; the reason says which      |
| OS_PAGECACHE_BUSY              | 503  | put lock busy or no free pool buffer: back-pressure,  |
|                                |      | with Retry-After                                      |
| SERVICE_NOT_AVAILABLE, store   | 503  | stopped after a failed sync, or closing: with         |
| failed or closed               |      | Retry-After (a restarted writer may take it)          |
| SERVICE_NOT_AVAILABLE, else    | 507  | disk full: retention refuses writes above             |
|                                |      | `disk_warning_ratio`, or a segment hit ENOSPC         |
| CREATE_MAPPED_FILE_FAILED      | 500  | a segment could not be made or mapped in time (the    |
|                                |      | engine reports ENOSPC/EDQUOT as disk full, above)     |
| (SYSTEM_BUSY, admission.py)    | 503  | `put_requests_in_flight_max` requests already being   |
|                                |      | served: refused before the body is read, Retry-After  |

SERVICE_NOT_AVAILABLE has four causes in the engine (closed, failed sync, a follower, full
disk; see `MessageStore._update_refusal` and `CommitLog._start_segment`); a follower's writer
refuses before it reaches the store, so "neither failed nor closed" means the disk is full.
"""

from __future__ import annotations

from mqstore.services.common.http.answers import ServiceError
from mqstore.services.common.http.batch_wire import STATUS_NAMES
from mqstore.storage import MessageStore, PutStatus

assert {status.value for status in PutStatus} == set(STATUS_NAMES[:len(PutStatus)]), \
    "the wire's status codes must cover every PutStatus, before the topic refusals"

SUCCESS_HTTP_STATUS = {PutStatus.PUT_OK: 200, PutStatus.FLUSH_DISK_TIMEOUT: 202,
                       PutStatus.FLUSH_SLAVE_TIMEOUT: 202, PutStatus.SLAVE_NOT_AVAILABLE: 202}
"""Statuses of a put that stored its messages (all but PUT_OK: stored, not confirmed)."""


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
