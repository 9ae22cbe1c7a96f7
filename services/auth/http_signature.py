"""Signed HTTP requests: the same users as the remoting front, the secret never sent.

A client holding an account's access key and secret key adds four headers:

    X-Mqstore-Access-Key      the account's accessKey
    X-Mqstore-Timestamp-Ms    the client's clock, Unix milliseconds
    X-Mqstore-Content-Sha256  hex SHA-256 of the body (of b"" when there is none)
    X-Mqstore-Signature       Base64(HMAC-SHA256(secretKey as UTF-8, string to sign))

    string to sign = "MQSTORE-HMAC-SHA256" \\n timestamp_ms \\n METHOD \\n path \\n
                     canonical query \\n content sha256

`path` is the path exactly as sent (percent-encoded as on the wire, no query); the
canonical query is the query's name=value pairs, decoded, sorted, each part re-encoded
with only `A-Za-z0-9-_.~` left as is, joined with `&` (empty when there is none).  The
server refuses a timestamp more than `auth.request_clock_skew_ms_max` from its clock, then
checks the signature before it reads the body, then the body against its hash.

Why signatures and not bearer tokens: the secret never crosses the network (the listeners
may run without TLS, on a laptop or behind a proxy), each request is bound to its method,
path, query and body, and a captured request is only good for the skew window.  A bearer
token would be cheaper by one HMAC and one SHA-256 per request, but anyone who saw one
request could act as that user for as long as the token lives.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import urllib.parse
from collections.abc import Iterable

ACCESS_KEY_HEADER = "X-Mqstore-Access-Key"
TIMESTAMP_HEADER = "X-Mqstore-Timestamp-Ms"
CONTENT_SHA256_HEADER = "X-Mqstore-Content-Sha256"
SIGNATURE_HEADER = "X-Mqstore-Signature"
SCHEME = "MQSTORE-HMAC-SHA256"
_UNRESERVED = "-_.~"


def canonical_query(pairs: Iterable[tuple[str, str]]) -> str:
    return "&".join(f"{urllib.parse.quote(name, safe=_UNRESERVED)}="
                    f"{urllib.parse.quote(value, safe=_UNRESERVED)}"
                    for name, value in sorted(pairs))


def string_to_sign(*, method: str, path: str, query: str, timestamp_ms: int,
                   content_sha256: str) -> bytes:
    return "\n".join((SCHEME, str(timestamp_ms), method.upper(), path, query,
                      content_sha256)).encode("utf-8")


def signature(secret_key: str, text: bytes) -> str:
    digest = hmac.new(secret_key.encode("utf-8"), text, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def sign_headers(*, access_key: str, secret_key: str, method: str, target: str,
                 body: bytes | None, now_ms: int | None = None) -> dict[str, str]:
    """The four headers for a request to `target` (path and query, as sent)."""
    path, _, query = target.partition("?")
    timestamp_ms = int(time.time() * 1000) if now_ms is None else now_ms
    content_sha256 = hashlib.sha256(body or b"").hexdigest()
    text = string_to_sign(
        method=method, path=path,
        query=canonical_query(urllib.parse.parse_qsl(query, keep_blank_values=True)),
        timestamp_ms=timestamp_ms, content_sha256=content_sha256)
    return {ACCESS_KEY_HEADER: access_key, TIMESTAMP_HEADER: str(timestamp_ms),
            CONTENT_SHA256_HEADER: content_sha256,
            SIGNATURE_HEADER: signature(secret_key, text)}


class Signer:
    """What a client keeps to sign its requests: one account's keys."""

    def __init__(self, access_key: str, secret_key: str) -> None:
        if not access_key or not secret_key:
            raise ValueError("both access_key and secret_key are needed to sign requests")
        self.access_key = access_key
        self._secret_key = secret_key

    def headers(self, method: str, target: str, body: bytes | None) -> dict[str, str]:
        return sign_headers(access_key=self.access_key, secret_key=self._secret_key,
                            method=method, target=target, body=body)

    def headers_for_url(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        """`headers` for a whole URL (its path and query are what is signed)."""
        split = urllib.parse.urlsplit(url)
        target = split.path + (f"?{split.query}" if split.query else "")
        return self.headers(method, target, body)


def signer_for(access_key: str | None, secret_key: str | None) -> Signer | None:
    """A signer when both keys are given, None when neither (unsigned requests)."""
    if access_key is None and secret_key is None:
        return None
    return Signer(access_key or "", secret_key or "")
