"""`AsyncProducer`: `Producer`'s API as coroutines, on an aiohttp session.

    async with AsyncProducer("http://writer:8081") as producer:
        result = await producer.send("Orders", b"...")

Concurrent sends share the session's connection pool (`connections_max`).  Retries and
errors are those of `Producer` (see producer.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType

import aiohttp

from mqstore.client.backoff import Backoff
from mqstore.client.calls import Call, base_path, batch_call, message_call
from mqstore.client.errors import UnavailableError
from mqstore.client.results import SendResult, retry_after_s
from mqstore.services.auth.http_signature import signer_for
from mqstore.services.common.http.batch_wire import WireMessage

_sleep = asyncio.sleep

RETRIED_ERRORS = (aiohttp.ClientConnectionError, asyncio.TimeoutError, OSError)


class AsyncProducer:
    def __init__(self, url: str, *, timeout_s: float = 10.0, retries_max: int = 3,
                 backoff_initial_ms: int = 50, backoff_max_ms: int = 2000,
                 connections_max: int = 8, access_key: str | None = None,
                 secret_key: str | None = None) -> None:
        """`access_key`, `secret_key`: sign every request as that account (see Producer)."""
        parts, prefix = base_path(url)
        self._signer = signer_for(access_key, secret_key)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._prefix = prefix
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._connections_max = connections_max
        self._backoff = Backoff(retries_max=retries_max, initial_ms=backoff_initial_ms,
                                max_ms=backoff_max_ms)
        self._session: aiohttp.ClientSession | None = None

    async def send(self, topic: str, body: bytes | str, *, queue_id: int | None = None,
                   tags: str | None = None, keys: Sequence[str] = (),
                   properties: Mapping[str, str] | None = None) -> SendResult:
        call = message_call(self._prefix, topic, body, queue_id=queue_id, tags=tags,
                            keys=keys, properties=properties)
        return (await self._call(call))[0]

    async def send_batch(self, messages: Iterable[WireMessage]) -> list[SendResult]:
        return await self._call(batch_call(self._prefix, messages))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    async def _call(self, call: Call) -> list[SendResult]:
        backoff = self._backoff
        for attempt in range(backoff.retries_max + 1):
            last = attempt == backoff.retries_max
            try:
                http_status, retry_after, body = await self._post(call)
            except RETRIED_ERRORS as error:
                if last:
                    raise UnavailableError(f"POST {call.path}: no answer after {attempt + 1} "
                                           f"attempts: {error!r}") from error
                await _sleep(backoff.delay_s(attempt))
                continue
            if http_status == 503 and not last:
                await _sleep(backoff.delay_s(attempt,
                                                    retry_after_s=retry_after_s(retry_after)))
                continue
            return call.answer(http_status, body)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _post(self, call: Call) -> tuple[int, str | None, bytes]:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                base_url=self._origin, timeout=self._timeout,
                connector=aiohttp.TCPConnector(limit=self._connections_max))
        headers = dict(call.headers)
        if self._signer is not None:
            headers.update(self._signer.headers("POST", call.path, call.body))
        async with self._session.post(call.path, data=call.body,
                                      headers=headers) as response:
            return response.status, response.headers.get("Retry-After"), await response.read()
