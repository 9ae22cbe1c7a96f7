"""The HTTP services' access check: one aiohttp middleware, the same users as remoting.

    route open (/healthz, /readyz, /metrics, /openapi.json)   → served, no credentials
    caller's address in globalWhiteRemoteAddresses           → allowed everything
    no / unknown access key, stale timestamp, bad signature   → 401 UNAUTHORIZED
    the route's needs (http_rules.py) not granted              → 403 FORBIDDEN
    the body does not match X-Mqstore-Content-Sha256          → 401 UNAUTHORIZED
    → the handler; a handler whose needs depend on the body (a binary batch's topics, a
      commit's topic) calls `require` once it has parsed it

Credentials are checked before the body is read (the body's hash is a signed header), so
a caller without a secret cannot make the service read a body.  With authentication off
(no users file) the middleware marks every request as allowed and `require` passes.
Refusals use the uniform error body (services/common/http/answers.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import time
from collections.abc import Callable, Iterable, Mapping

from aiohttp import web
from aiohttp.typedefs import Middleware

from mqstore.services.auth.http_signature import (
    ACCESS_KEY_HEADER,
    CONTENT_SHA256_HEADER,
    SCHEME,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    canonical_query,
    signature,
    string_to_sign,
)
from mqstore.services.auth.permissions import ADMIN, Need
from mqstore.services.auth.users import Account, Users
from mqstore.services.common.http.answers import Handler, ServiceError

Rule = Callable[[web.Request], list[Need]] | None
"""What a route needs, from its path and query; None: open to anyone."""
RouteRules = Mapping[tuple[str, str], Rule]
"""(method, path template as registered) → rule."""


@dataclasses.dataclass(frozen=True)
class Caller:
    account: Account | None
    """None: authentication is off, or the address is globally white-listed."""

    def refusal(self, needs: Iterable[Need]) -> str | None:
        return None if self.account is None else self.account.refusal(needs)


CALLER = web.RequestKey("mqstore_caller", Caller)
EVERYONE = Caller(None)


def require(request: web.Request, needs: Iterable[Need]) -> None:
    """403 unless the request's caller has every need (the middleware set the caller)."""
    reason = request[CALLER].refusal(needs)
    if reason is not None:
        raise ServiceError(403, "FORBIDDEN", reason)


def access_middleware(users: Users | None, rules: RouteRules, *, clock_skew_ms_max: int,
                      clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)
                      ) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if users is None:
            request[CALLER] = EVERYONE
            return await handler(request)
        matched = request.match_info.http_exception is None
        resource = request.match_info.route.resource
        key = (request.method, resource.canonical if resource is not None else "")
        rule = rules.get(key, _admin_only) if matched else _no_needs
        if rule is None:
            request[CALLER] = EVERYONE
            return await handler(request)
        caller, content_sha256 = _authenticate(request, users, clock_skew_ms_max, clock_ms())
        request[CALLER] = caller
        require(request, rule(request))
        if content_sha256 is not None:
            body = await request.read()
            if not hmac.compare_digest(hashlib.sha256(body).hexdigest(), content_sha256):
                raise _unauthorized(f"the body does not match {CONTENT_SHA256_HEADER}")
        return await handler(request)

    return middleware


def _admin_only(request: web.Request) -> list[Need]:
    """A route without a rule (a bug the rules test catches): only admins."""
    return [ADMIN]


def _no_needs(request: web.Request) -> list[Need]:
    """No route matched: any authenticated caller gets the 404 or 405."""
    return []


def _authenticate(request: web.Request, users: Users, skew_ms_max: int,
                  now_ms: int) -> tuple[Caller, str | None]:
    """The caller, and the body hash still to check (None: nothing to check)."""
    address = request.remote or ""
    if users.is_globally_white(address):
        return EVERYONE, None
    headers = request.headers
    access_key = headers.get(ACCESS_KEY_HEADER)
    if not access_key:
        raise _unauthorized(f"credentials required: sign the request ({ACCESS_KEY_HEADER}, "
                            f"{TIMESTAMP_HEADER}, {CONTENT_SHA256_HEADER}, "
                            f"{SIGNATURE_HEADER}; docs/http-api.md)")
    account = users.account(access_key)
    if account is None:
        raise _unauthorized(f"unknown access key {access_key[:64]!r}")
    if account.is_white(address):
        return Caller(account), None
    timestamp_text = headers.get(TIMESTAMP_HEADER, "")
    content_sha256 = headers.get(CONTENT_SHA256_HEADER, "")
    if not timestamp_text.isdigit() or len(timestamp_text) > 15:
        raise _unauthorized(f"{TIMESTAMP_HEADER} must be Unix milliseconds")
    if abs(now_ms - int(timestamp_text)) > skew_ms_max:
        raise _unauthorized(f"{TIMESTAMP_HEADER} is {now_ms - int(timestamp_text)} ms from "
                            f"the server's clock; at most {skew_ms_max} "
                            f"(auth.request_clock_skew_ms_max)")
    if len(content_sha256) != 64:
        raise _unauthorized(f"{CONTENT_SHA256_HEADER} must be the body's hex SHA-256")
    expected = signature(account.secret_key, string_to_sign(
        method=request.method, path=request.rel_url.raw_path,
        query=canonical_query(request.rel_url.query.items()),
        timestamp_ms=int(timestamp_text), content_sha256=content_sha256.lower()))
    if not hmac.compare_digest(expected, headers.get(SIGNATURE_HEADER, "")):
        raise _unauthorized(f"the signature does not match for access key {access_key}")
    return Caller(account), content_sha256.lower()


def _unauthorized(reason: str) -> ServiceError:
    return ServiceError(401, "UNAUTHORIZED", reason, headers={"WWW-Authenticate": SCHEME})
