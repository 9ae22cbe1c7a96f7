"""Reading request bodies safely: refuse oversized ones unread, bound the wait, bound nesting.

| client sends                                      | answer                              |
|---------------------------------------------------|-------------------------------------|
| `Content-Length` over the app's body limit, with  | 413 instead of `100 Continue`; the  |
| `Expect: 100-continue`                            | body is never asked for             |
| `Content-Length` over the limit, no `Expect`      | 413 at once, the connection closed  |
|                                                   | (the body is not read nor waited for)|
| a body that does not arrive within                | 408 REQUEST_TIMEOUT, the connection |
| `body_read_timeout_ms`                            | closed (its admission slot freed)   |
| JSON nested deeper than `json_depth_max`          | 400 BAD_REQUEST, nothing parsed     |

A chunked body has no `Content-Length`: aiohttp counts it while reading and answers 413 past
the limit.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from itertools import accumulate

from aiohttp import web
from aiohttp.web_urldispatcher import _default_expect_handler

from mqstore.services.common.http.answers import ServiceError, error_response
from mqstore.services.common.http.json_numbers import JSON_NUMBERS
from mqstore.services.common.http.server import close_after_answer

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ExpectHandler = Callable[[web.Request], Awaitable[web.StreamResponse | None]]

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""A JSON string (brackets inside one are text, not structure)."""
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_DEPTH_STEP = tuple(1 if byte in b"[{" else -1 if byte in b"]}" else 0 for byte in range(256))


def too_large(request: web.BaseRequest, *, body_size_bytes_max: int) -> ServiceError | None:
    """The 413 for a declared body over the limit (None if it is within it)."""
    declared = request.content_length
    if declared is None or declared <= body_size_bytes_max:
        return None
    return ServiceError(413, "REQUEST_ENTITY_TOO_LARGE",
                        f"the body is {declared} bytes (Content-Length); the limit is "
                        f"{body_size_bytes_max} bytes")


def body_size_middleware(*, body_size_bytes_max: int) -> Callable[..., Awaitable[
        web.StreamResponse]]:
    """Refuse a declared oversized body before any handler reads (or waits for) it.  Goes
    inside the error middleware, which shapes the 413."""

    @web.middleware
    async def refuse_oversized(request: web.Request, handler: Handler) -> web.StreamResponse:
        refusal = too_large(request, body_size_bytes_max=body_size_bytes_max)
        if refusal is not None:
            close_after_answer(request)
            raise refusal
        return await handler(request)

    return refuse_oversized


def body_size_expect_handler(*, body_size_bytes_max: int) -> ExpectHandler:
    """`Expect: 100-continue`: answer 413 instead of inviting an oversized body (aiohttp's
    own handler says `100 Continue` to any size)."""

    async def expect(request: web.Request) -> web.StreamResponse | None:
        refusal = too_large(request, body_size_bytes_max=body_size_bytes_max)
        if refusal is None:
            await _default_expect_handler(request)
            return None
        close_after_answer(request)
        return error_response(refusal.http_status, refusal.status, refusal.reason)

    return expect


async def read_body(request: web.Request, *, timeout_ms: int) -> bytes:
    """The whole body, or 408 if it has not all arrived within `timeout_ms`."""
    try:
        return await asyncio.wait_for(request.read(), timeout_ms / 1000)
    except TimeoutError:
        close_after_answer(request)
        raise ServiceError(408, "REQUEST_TIMEOUT", f"the request body did not arrive within "
                                                   f"{timeout_ms} ms (body_read_timeout_ms)"
                           ) from None


def json_depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in the JSON text `raw` (0 for a scalar).
    Valid JSON gives its true depth; junk gives some number, and the parser refuses it."""
    structure = _JSON_STRING.sub(b"", raw).translate(None, delete=_NOT_BRACKETS)
    return max(accumulate(map(_DEPTH_STEP.__getitem__, structure)), default=0)


def parse_json(raw: bytes, *, depth_max: int) -> object:
    """`raw` as JSON: 400 BAD_REQUEST if it is not UTF-8, not JSON, or nested deeper than
    `depth_max`.  A body with fewer brackets than `depth_max` cannot nest deeper, so most
    bodies skip the depth scan."""
    if raw.count(b"[") + raw.count(b"{") > depth_max:
        depth = json_depth(raw)
        if depth > depth_max:
            raise ServiceError(400, "BAD_REQUEST", f"the JSON body nests {depth} levels "
                                                   f"deep; the limit is {depth_max} "
                                                   f"(json_depth_max)")
    try:
        # RFC 8259: JSON on the wire is UTF-8; numbers exact (json_numbers.py)
        return json.loads(raw.decode("utf-8"), **JSON_NUMBERS)
    except UnicodeDecodeError as error:
        raise ServiceError(400, "BAD_REQUEST",
                           f"request body is not UTF-8: {error.reason}") from None
    except ValueError as error:  # JSONDecodeError, or an integer over 4,300 digits
        raise ServiceError(400, "BAD_REQUEST",
                           f"request body is not valid JSON: {error}") from None
    except RecursionError:  # only if json_depth_max is set near the interpreter's limit
        raise ServiceError(400, "BAD_REQUEST", "the JSON body nests too deep to parse"
                           ) from None
