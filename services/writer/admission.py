"""A bound on put requests in flight: past it, 503 SYSTEM_BUSY with Retry-After at once.

Under sync flush (or a sync master) each put request waits for a group commit (or a
follower) while holding its decoded body; nothing else bounds how many wait.  RocketMQ
bounds the same queue (`sendThreadPoolQueueCapacity`, 10,000) and answers SYSTEM_BUSY.  Here
the count is checked before the body is read, so a refused request costs no memory and
stores nothing; the client retries after Retry-After like any other 503.

Memory held by admitted requests is at most `put_requests_in_flight_max` ×
`request_body_size_bytes_max` (plus the decoded messages).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from mqstore.services.common.http import ServiceError

BUSY_STATUS = "SYSTEM_BUSY"
"""The error body's status (RocketMQ's response code for the same refusal)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Admission:
    """Counts the put requests being served; refuses one more past `limit`."""

    def __init__(self, *, limit: int, retry_after_s: int) -> None:
        assert limit > 0 and retry_after_s > 0
        self.limit = limit
        self.in_flight = 0
        """Put requests admitted and not yet answered (the event loop's only: no lock)."""
        self.refused_total = 0
        self._retry_after = {"Retry-After": str(retry_after_s)}

    def middleware(self, routes: frozenset[str]) -> Callable[..., Awaitable[web.StreamResponse]]:
        """Admission for the routes named in `routes` (the put routes); others pass."""

        @web.middleware
        async def admit(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.match_info.route.name not in routes:
                return await handler(request)
            if self.in_flight >= self.limit:
                self.refused_total += 1
                raise ServiceError(503, BUSY_STATUS,
                                   f"{self.in_flight} put requests are already in flight; "
                                   f"the limit is {self.limit} (put_requests_in_flight_max)",
                                   headers=self._retry_after)
            self.in_flight += 1
            try:
                return await handler(request)
            finally:
                self.in_flight -= 1

        return admit
