"""`AsyncConsumer`: `Consumer`'s API as coroutines, on an aiohttp session.

    async with AsyncConsumer("http://notifier:8083", "billing", "Orders") as consumer:
        for message in await consumer.poll(max_messages=32, wait_ms=5000):
            await handle(message)
        await consumer.commit()

Delivery (at least once: polled but uncommitted messages come again after a restart),
retries and errors are those of `Consumer` (see consumer.py).  One `AsyncConsumer` polls
one topic for one group; do not run two of its polls at once (positions would race).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType

import aiohttp

from mqstore.client.backoff import Backoff
from mqstore.client.calls import base_path
from mqstore.client.consumer import DEFAULT_WAIT_MS
from mqstore.client.consumer_calls import ConsumerState, ReceivedMessage, Request, read_answer
from mqstore.client.errors import UnavailableError
from mqstore.client.results import retry_after_s
from mqstore.services.auth.http_signature import signer_for

RETRIED_ERRORS = (aiohttp.ClientConnectionError, asyncio.TimeoutError, OSError)


class AsyncConsumer:
    def __init__(self, url: str, group: str, topic: str, *, tags: Sequence[str] | None = None,
                 timeout_s: float = 10.0, retries_max: int = 3, backoff_initial_ms: int = 50,
                 backoff_max_ms: int = 2000, access_key: str | None = None,
                 secret_key: str | None = None) -> None:
        """`access_key`, `secret_key`: sign every request as that account (see Consumer)."""
        parts, prefix = base_path(url)
        self._signer = signer_for(access_key, secret_key)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._timeout_s = timeout_s
        self._backoff = Backoff(retries_max=retries_max, initial_ms=backoff_initial_ms,
                                max_ms=backoff_max_ms)
        self._state = ConsumerState(prefix, group, topic, tags=tags)
        self._session: aiohttp.ClientSession | None = None

    @property
    def positions(self) -> dict[int, int]:
        """Per queue, the next offset after what `poll` returned."""
        return dict(self._state.positions)

    async def poll(self, max_messages: int = 32, wait_ms: int = DEFAULT_WAIT_MS
                   ) -> list[ReceivedMessage]:
        """Up to `max_messages` new messages, waiting up to `wait_ms` for some."""
        loop = asyncio.get_running_loop()
        deadline_s = loop.time() + wait_ms / 1000
        remaining_ms = wait_ms  # the first request asks for exactly what the caller did
        while True:
            before = dict(self._state.positions)
            request = self._state.poll_request(max_messages=max_messages, wait_ms=remaining_ms)
            messages = self._state.take(request, await self._call(request, wait_ms=remaining_ms))
            if messages or self._state.positions == before or remaining_ms == 0:
                return messages
            remaining_ms = max(0, int((deadline_s - loop.time()) * 1000))

    async def commit(self) -> None:
        """Commit the offsets past every message `poll` returned (nothing if none moved)."""
        request = self._state.commit_request()
        if request is not None:
            self._state.committed_by(request, await self._call(request, wait_ms=0))

    async def close(self) -> None:
        """Close the session; uncommitted messages will be delivered again."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> AsyncConsumer:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    async def _call(self, request: Request, *, wait_ms: int) -> dict[str, object]:
        backoff = self._backoff
        for attempt in range(backoff.retries_max + 1):
            last = attempt == backoff.retries_max
            try:
                http_status, retry_after, body = await self._send(request, wait_ms=wait_ms)
            except RETRIED_ERRORS as error:
                if last:
                    raise UnavailableError(f"{request.method} {request.path}: no answer after "
                                           f"{attempt + 1} attempts: {error!r}") from error
                await asyncio.sleep(backoff.delay_s(attempt))
                continue
            if http_status == 503 and not last:
                await asyncio.sleep(backoff.delay_s(attempt,
                                                    retry_after_s=retry_after_s(retry_after)))
                continue
            return read_answer(request, http_status, body)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _send(self, request: Request, *, wait_ms: int) -> tuple[int, str | None, bytes]:
        if self._session is None:
            self._session = aiohttp.ClientSession(base_url=self._origin)
        timeout = aiohttp.ClientTimeout(total=self._timeout_s + wait_ms / 1000)
        headers = {"Content-Type": "application/json"}
        if self._signer is not None:
            headers.update(self._signer.headers(request.method, request.path, request.body))
        async with self._session.request(request.method, request.path, data=request.body,
                                         headers=headers, timeout=timeout) as response:
            return response.status, response.headers.get("Retry-After"), await response.read()
