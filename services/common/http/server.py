"""The HTTP connection every service serves: aiohttp's, with the limits a hostile client needs.

aiohttp's own connection handling leaves three doors open, closed here at the protocol level
(where no handler or middleware can reach):

| client does                                   | aiohttp alone                 | here           |
|-----------------------------------------------|-------------------------------|----------------|
| opens a connection, sends headers slowly or   | waits for the keep-alive timer| 408 JSON, close|
| never                                         | (an hour)                     | after `header_ |
|                                               |                               | read_timeout_ms`|
| sends a bad request line or header            | text/plain 400, logged at     | 400 JSON body, |
|                                               | ERROR with a traceback        | logged at DEBUG|
| is refused before its body was read (413,     | reads and drops the body for  | closes right   |
| 408): `close_after_answer(request)`           | 10 s (lingering)              | after the answer|

Serve through `GuardedRunner` instead of `web.AppRunner`; everything else is aiohttp's.
"""

from __future__ import annotations

import asyncio
import http
import json
import logging
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from mqstore.services.common.http.answers import error_body, error_response

log = logging.getLogger("mqstore.http")

CLOSE_AFTER_ANSWER = web.RequestKey("mqstore_close_after_answer", bool)
"""Request key: the connection closes once the answer is written (its body is unread)."""
REASON_CHARACTERS_MAX = 200
"""A parse error's text quotes the client's bytes; this much of it is enough to debug."""


def close_after_answer(request: web.BaseRequest) -> None:
    """Close the connection after answering `request`: its body was refused unread, and
    reading (or waiting for) it only keeps a hostile client's socket alive."""
    request[CLOSE_AFTER_ANSWER] = True


class GuardedRequestHandler(RequestHandler):
    """aiohttp's connection protocol with a header read timeout, JSON answers to malformed
    requests, and an early close for refused bodies (see the module docstring)."""

    def __init__(self, manager: web.Server, *, loop: asyncio.AbstractEventLoop,
                 header_read_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(manager, loop=loop, **kwargs)
        self._header_read_timeout_s = header_read_timeout_s
        self._header_timer: asyncio.TimerHandle | None = None
        self._between_requests = True
        """No request's headers are being read or its answer written: the next byte that
        arrives starts a request (and its header timer)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm_header_timer()  # a connection that never sends a byte is held too

    def data_received(self, data: bytes) -> None:
        requests_before = self._request_count
        if self._between_requests:
            self._between_requests = False
            self._arm_header_timer()
        super().data_received(data)
        if self._request_count > requests_before:
            self._cancel_header_timer()  # headers complete: the body has its own timeout

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    async def finish_response(self, request: web.BaseRequest, resp: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        answered = await super().finish_response(request, resp, start_time)
        self._between_requests = True
        if request.get(CLOSE_AFTER_ANSWER):
            self.force_close()  # the transport flushes the answer, then closes
        return answered

    def handle_error(self, request: web.BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """Malformed requests (aiohttp's parser refused them) and errors that escaped every
        middleware: the uniform JSON body, the connection closed.  A client's junk is logged
        at DEBUG without a traceback; only a server error is logged with one."""
        if request.writer.output_size > 0:
            raise ConnectionError("an answer was already partly sent; the connection closes")
        if status >= 500:
            log.error("request failed outside the handlers", exc_info=exc,
                      extra={"remote": request.remote, "http_status": status})
            reason = "unexpected server error; the service log has the details"
            name = "INTERNAL_ERROR"
        else:
            reason = (message or http.HTTPStatus(status).phrase)[:REASON_CHARACTERS_MAX]
            name = http.HTTPStatus(status).name
            log.debug("malformed request refused", extra={
                "remote": request.remote, "http_status": status, "reason": reason})
        response = error_response(status, name, reason)
        response.force_close()
        return response

    # -- header timer -----------------------------------------------------------------------
    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self._loop.call_later(self._header_read_timeout_s,
                                                   self._header_timeout)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        idle = self._waiter is not None and not self._waiter.done()
        if not idle or self.transport is None:
            return  # a request is being answered (or its unread body drained): not headers
        body = json.dumps(error_body(
            "REQUEST_TIMEOUT", f"the request line and headers did not arrive within "
                               f"{round(self._header_read_timeout_s * 1000)} ms "
                               f"(header_read_timeout_ms)")).encode()
        head = (f"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        log.debug("request headers timed out", extra={"peer": self.peername})
        self.transport.write(head + body)
        self.force_close()


class _GuardedServer(web.Server):
    """aiohttp's connection factory, making `GuardedRequestHandler`s."""

    def __init__(self, *args: Any, header_read_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_read_timeout_s = header_read_timeout_s

    def __call__(self) -> RequestHandler:
        return GuardedRequestHandler(self, loop=self._loop,
                                     header_read_timeout_s=self._header_read_timeout_s,
                                     **self._kwargs)


class GuardedRunner(web.AppRunner):
    """`web.AppRunner` whose connections are `GuardedRequestHandler`s."""

    def __init__(self, app: web.Application, *, header_read_timeout_ms: int,
                 **kwargs: Any) -> None:
        assert header_read_timeout_ms > 0
        super().__init__(app, **kwargs)
        self._header_read_timeout_s = header_read_timeout_ms / 1000

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()
        return _GuardedServer(made.request_handler, request_factory=made.request_factory,
                              handler_cancellation=made.handler_cancellation,
                              loop=made._loop, header_read_timeout_s=self._header_read_timeout_s,
                              **made._kwargs)
