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
import time
from collections.abc import Sequence
from types import TracebackType

import aiohttp

from mqstore.client.backoff import Backoff
from mqstore.client.calls import base_path
from mqstore.client.consumer import DEFAULT_WAIT_MS
from mqstore.client.consumer_calls import ConsumerState, ReceivedMessage, Request, read_answer
from mqstore.client.errors import UnavailableError
from mqstore.client.results import retry_after_s
from mqstore.client.retries import (
    DEFAULT_RETRY_POLL_INTERVAL_MS,
    NackResult,
    PollRound,
    RetryPolling,
)
from mqstore.services.auth.http_signature import signer_for

RETRIED_ERRORS = (aiohttp.ClientConnectionError, asyncio.TimeoutError, OSError)


class AsyncConsumer:
    def __init__(self, url: str, group: str, topic: str, *, tags: Sequence[str] | None = None,
                 timeout_s: float = 10.0, retries_max: int = 3, backoff_initial_ms: int = 50,
                 backoff_max_ms: int = 2000, access_key: str | None = None,
                 secret_key: str | None = None, poll_retries: bool = True,
                 retry_poll_interval_ms: int = DEFAULT_RETRY_POLL_INTERVAL_MS) -> None:
        """`access_key`, `secret_key`: sign every request as that account (see Consumer)."""
        parts, prefix = base_path(url)
        self._signer = signer_for(access_key, secret_key)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._timeout_s = timeout_s
        self._backoff = Backoff(retries_max=retries_max, initial_ms=backoff_initial_ms,
                                max_ms=backoff_max_ms)
        self._state = ConsumerState(prefix, group, topic, tags=tags)
        self._retries = RetryPolling(prefix, group, poll_interval_ms=retry_poll_interval_ms)
        self._poll_retries = poll_retries
        self._session: aiohttp.ClientSession | None = None

    @property
    def positions(self) -> dict[int, int]:
        """Per queue, the next offset after what `poll` returned."""
        return dict(self._state.positions)

    async def poll(self, max_messages: int = 32, wait_ms: int = DEFAULT_WAIT_MS
                   ) -> list[ReceivedMessage]:
        """Up to `max_messages` new messages (of the topic or, when due, of the group's retry
        topic), waiting up to `wait_ms` for some."""
        poll = PollRound(self._state, self._retries if self._poll_retries else None,
                         max_messages=max_messages, wait_ms=wait_ms, clock_s=time.monotonic)
        while (step := poll.next()) is not None:
            messages = poll.answered(step, await self._call(step.request,
                                                            wait_ms=step.wait_ms))
            if messages:
                return messages
        return []

    async def nack(self, message: ReceivedMessage, *, delay_level: int = 0,
                   max_reconsume_times: int | None = None) -> NackResult:
        """`Consumer.nack`: `message` comes again later, or goes to the dead letter queue."""
        request = self._retries.nack_request(message, delay_level=delay_level,
                                             max_reconsume_times=max_reconsume_times)
        return self._retries.nacked(request, await self._call(request, wait_ms=0))

    async def commit(self) -> None:
        """Commit the offsets past every message `poll` returned (nothing if none moved)."""
        for state in (self._state, self._retries.state):
            request = state.commit_request()
            if request is not None:
                state.committed_by(request, await self._call(request, wait_ms=0))

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
