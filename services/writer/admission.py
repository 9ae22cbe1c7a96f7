"""A bound on put requests in flight: past it, 503 SYSTEM_BUSY with Retry-After at once.

Under sync flush (or a sync master) each put request waits for a group commit (or a
follower) while holding its decoded body; nothing else bounds how many wait.  RocketMQ
bounds the same queue (`sendThreadPoolQueueCapacity`, 10,000) and answers SYSTEM_BUSY.  Here
the count is checked before the body is read, so a refused request costs no memory and
stores nothing; the client retries after Retry-After like any other 503.

Memory held by admitted requests is at most `put_requests_in_flight_max` ×
`request_body_size_bytes_max` (plus the decoded messages).

One client (remote address) holds at most `put_requests_per_client_max` of the slots; one
more of its requests gets 429 with Retry-After, so a client that stalls its requests (and
waits out `body_read_timeout_ms` on each) cannot take the slots of the others.  While every
slot is taken, /readyz says so (503): the writer cannot take a put from anyone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from mqstore.services.common.http.answers import ServiceError

BUSY_STATUS = "SYSTEM_BUSY"
"""The error body's status (RocketMQ's response code for the same refusal)."""
UNKNOWN_CLIENT = ""
"""The remote address of a request whose transport does not say (a Unix socket)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Admission:
    """Counts the put requests being served; refuses one more past `limit`."""

    def __init__(self, *, limit: int, per_client_limit: int, retry_after_s: int) -> None:
        assert limit > 0 and retry_after_s > 0 and per_client_limit > 0
        self.limit = limit
        self.per_client_limit = min(per_client_limit, limit)
        self.in_flight = 0
        """Put requests admitted and not yet answered (the event loop's only: no lock)."""
        self._by_client: dict[str, int] = {}
        """Remote address → its requests in flight (no entry at zero: bounded by `limit`)."""
        self.refused_total = 0
        self._retry_after = {"Retry-After": str(retry_after_s)}

    def saturated(self) -> str | None:
        """Why the writer cannot admit a put now, or None (for /readyz)."""
        if self.in_flight < self.limit:
            return None
        return (f"every put admission slot is taken ({self.in_flight} requests in flight; "
                f"put_requests_in_flight_max={self.limit})")

    def middleware(self, routes: frozenset[str]) -> Callable[..., Awaitable[web.StreamResponse]]:
        """Admission for the routes named in `routes` (the put routes); others pass."""

        @web.middleware
        async def admit(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.match_info.route.name not in routes:
                return await handler(request)
            client = request.remote or UNKNOWN_CLIENT
            self._refuse_if_full(client)
            self.in_flight += 1
            self._by_client[client] = self._by_client.get(client, 0) + 1
            try:
                return await handler(request)
            finally:
                self.in_flight -= 1
                left = self._by_client.pop(client) - 1
                if left:
                    self._by_client[client] = left

        return admit

    def _refuse_if_full(self, client: str) -> None:
        if self.in_flight >= self.limit:
            self.refused_total += 1
            raise ServiceError(503, BUSY_STATUS,
                               f"{self.in_flight} put requests are already in flight; "
                               f"the limit is {self.limit} (put_requests_in_flight_max)",
                               headers=self._retry_after)
        held = self._by_client.get(client, 0)
        if held >= self.per_client_limit:
            self.refused_total += 1
            raise ServiceError(429, BUSY_STATUS,
                               f"this client ({client}) has {held} put requests in flight "
                               f"already; the limit per client is {self.per_client_limit} "
                               f"(put_requests_per_client_max)", headers=self._retry_after)
