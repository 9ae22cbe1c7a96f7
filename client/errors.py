"""What a send raises: one base class, one subclass per thing the caller can act on.

    MqstoreError                 base
    ├── BadRequestError          4xx: the request or a message is wrong; never retried
    ├── UnavailableError         503 (busy, stopping, or stopped) or no connection, after
    │                            every retry; the last cause is chained
    ├── DiskFullError            507: the writer refuses writes until retention frees space
    └── ServerError              500 or another unexpected answer

A 202 (FLUSH_DISK_TIMEOUT) raises nothing: the message was stored, so the send returns its
result with `status == "FLUSH_DISK_TIMEOUT"` and `ok` False (durability not confirmed).
"""

from __future__ import annotations


class MqstoreError(Exception):
    """Base of every error the client raises; `http_status` is 0 without an answer."""

    def __init__(self, reason: str, *, http_status: int = 0, status: str = "") -> None:
        super().__init__(f"{http_status} {status}: {reason}" if http_status else reason)
        self.http_status = http_status
        self.status = status
        """The server's status name (MESSAGE_ILLEGAL, OS_PAGECACHE_BUSY, NOT_FOUND, ...)."""
        self.reason = reason


class BadRequestError(MqstoreError):
    """4xx: fix the request; retrying the same one gets the same answer."""


class UnavailableError(MqstoreError):
    """No writer took the request (503 or connection failures) within the retries."""


class DiskFullError(MqstoreError):
    """507: the writer's volume is full."""


class ServerError(MqstoreError):
    """500 or an answer the client does not understand."""
