"""HTTP basics every service shares: the error body, the error middleware, the probe routes.

Every error, whoever raises it (a handler, aiohttp's router, the body size limit), has one
JSON shape:

    {"error": {"status": "MESSAGE_ILLEGAL", "reason": "message 3 of the batch: ..."}}

`status` is the store's status name where there is one, else the HTTP status name
(`NOT_FOUND`, `REQUEST_ENTITY_TOO_LARGE`); `reason` is for humans.  Common routes:

    GET /healthz        200 while the process runs (liveness)
    GET /readyz         200 when the service can do its work, else 503 with the reason
    GET /metrics        Prometheus text exposition of the app's own registry
    GET /openapi.json   the app's OpenAPI document (built in code beside its handlers)
"""

from __future__ import annotations

import http
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from mqstore.services.common.observability.metrics import metrics_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NotReady = Callable[[], str | None]
"""Returns None when ready, else why not."""

JSON_MEDIA_TYPE = "application/json"
CLIENT_CLOSED_REQUEST = 499


class ServiceError(Exception):
    """Raised by a handler to answer with the uniform error body."""

    def __init__(self, http_status: int, status: str, reason: str, *,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(reason)
        assert 400 <= http_status <= 599, http_status
        self.http_status = http_status
        self.status = status
        self.reason = reason
        self.headers = dict(headers or {})


def error_body(status: str, reason: str) -> dict[str, Any]:
    return {"error": {"status": status, "reason": reason}}


def json_response(document: object, *, http_status: int = 200,
                  headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(status=http_status, body=json.dumps(document).encode(),
                        content_type=JSON_MEDIA_TYPE, headers=headers)


def error_response(http_status: int, status: str, reason: str, *,
                   headers: Mapping[str, str] | None = None) -> web.Response:
    return json_response(error_body(status, reason), http_status=http_status, headers=headers)


def error_middleware(log: logging.Logger) -> Any:
    """Turn every failure into the uniform error body; log server errors, not client ones
    (a client sending junk must not be able to flood the log)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ServiceError as error:
            level = logging.WARNING if error.http_status >= 500 else logging.DEBUG
            log.log(level, "request refused", extra={
                "method": request.method, "path": request.path, "http_status": error.http_status,
                "status": error.status, "reason": error.reason})
            return error_response(error.http_status, error.status, error.reason,
                                  headers=error.headers)
        except web.HTTPException as error:
            if error.status < 400:
                raise
            headers = {"Allow": error.headers["Allow"]} if "Allow" in error.headers else None
            return error_response(error.status, http.HTTPStatus(error.status).name,
                                  _reason(request, error), headers=headers)
        except ConnectionResetError:
            # The client went away mid-request (or shutdown closed its connection while its
            # body was still arriving): not a server error.  499 (nginx's "client closed
            # request") is what the metrics count; nobody is left to read it.
            log.debug("client went away", extra={"method": request.method,
                                                  "path": request.path})
            return error_response(CLIENT_CLOSED_REQUEST, "CLIENT_CLOSED_REQUEST",
                                  "the connection was reset before the request was answered")
        except Exception:
            log.exception("request failed", extra={"method": request.method,
                                                   "path": request.path})
            return error_response(500, "INTERNAL_ERROR",
                                  "unexpected server error; the service log has the details")

    return middleware


def _reason(request: web.Request, error: web.HTTPException) -> str:
    """aiohttp's own text ("404: Not Found") says less than the request does."""
    if error.text and error.text != f"{error.status}: {error.reason}":
        return error.text
    if error.status == 404:
        return f"no route for {request.method} {request.path}"
    if error.status == 405:
        return (f"{request.method} is not allowed on {request.path}; allowed: "
                f"{error.headers.get('Allow', 'none')}")
    return error.reason


def add_common_routes(app: web.Application, *, registry: CollectorRegistry,
                      openapi: Mapping[str, Any], not_ready: NotReady) -> None:
    """Add /healthz, /readyz, /metrics and /openapi.json to `app`."""
    openapi_body = json.dumps(openapi).encode()

    async def healthz(request: web.Request) -> web.Response:
        return json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        reason = not_ready()
        if reason is not None:
            return error_response(503, "NOT_READY", reason)
        # The pid tells a supervisor (`mqstore up`) that its own child answered, not another
        # process on the same port.
        return json_response({"status": "ready", "pid": os.getpid()})

    async def metrics(request: web.Request) -> web.Response:
        return metrics_response(registry)

    async def openapi_json(request: web.Request) -> web.Response:
        return web.Response(body=openapi_body, content_type=JSON_MEDIA_TYPE)

    app.router.add_get("/healthz", healthz, allow_head=False)
    app.router.add_get("/readyz", readyz, allow_head=False)
    app.router.add_get("/metrics", metrics, allow_head=False)
    app.router.add_get("/openapi.json", openapi_json, allow_head=False)
