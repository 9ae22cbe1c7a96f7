"""`AdminClient`: the admin commands' HTTP calls, signed when keys are given.

Not the produce/consume client (mqstore.client): an admin call is made once and its answer
shown, so a 503 or a lost connection is reported rather than retried (the operator runs the
command again), and every answer's JSON comes back as it is.  Errors are `AdminError`s
carrying the exit code and one line: 2 for a 4xx (the server's status and reason: the
request or the operator's input was wrong), 1 for a service that does not answer (naming
its URL) or answers 5xx.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from collections.abc import Mapping
from typing import Any

from mqstore.services.auth.http_signature import Signer

EXIT_FAILED = 1
EXIT_USAGE = 2


class AdminError(Exception):
    """One line for stderr and the exit code (EXIT_USAGE or EXIT_FAILED)."""

    def __init__(self, line: str, *, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(line)
        self.exit_code = exit_code


class AdminClient:
    def __init__(self, *, timeout_ms: int, signer: Signer | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        """`timeout_ms`: how long one call may take to connect and answer."""
        self._timeout_s = timeout_ms / 1000
        self._signer = signer
        self._ssl_context = ssl_context

    def call(self, base_url: str, method: str, path: str, *,
             query: Mapping[str, object] | None = None,
             body: object | None = None) -> dict[str, Any]:
        """The JSON answer of `method path?query` at `base_url`; AdminError on anything but a
        2xx with a JSON object."""
        status, answer = self.exchange(base_url, method, path, query=query, body=body)
        document = _json_object(answer)
        if 200 <= status < 300 and document is not None:
            return document
        raise _refusal(f"{method} {base_url}{path}", status, document, answer)

    def exchange(self, base_url: str, method: str, path: str, *,
                 query: Mapping[str, object] | None = None,
                 body: object | None = None) -> tuple[int, bytes]:
        """(HTTP status, body) as the service answered; AdminError if it did not answer."""
        parts = urllib.parse.urlsplit(base_url)
        target = parts.path.rstrip("/") + path
        if query:
            target += "?" + urllib.parse.urlencode({k: str(v) for k, v in query.items()})
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self._signer is not None:
            headers.update(self._signer.headers(method, target, data))
        connection = self._connection(parts)
        try:
            connection.request(method, target, body=data, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as error:
            raise AdminError(f"{base_url} does not answer: {_cause(error)}",
                             exit_code=EXIT_FAILED) from None
        finally:
            connection.close()

    def _connection(self, parts: urllib.parse.SplitResult) -> http.client.HTTPConnection:
        if parts.scheme == "https":
            return http.client.HTTPSConnection(parts.hostname or "", parts.port,
                                               timeout=self._timeout_s,
                                               context=self._ssl_context)
        return http.client.HTTPConnection(parts.hostname or "", parts.port,
                                          timeout=self._timeout_s)


def _json_object(answer: bytes) -> dict[str, Any] | None:
    try:
        document = json.loads(answer)
    except (ValueError, UnicodeDecodeError):
        return None
    return document if isinstance(document, dict) else None


def _refusal(what: str, status: int, document: dict[str, Any] | None,
             answer: bytes) -> AdminError:
    """The server's uniform error body (services/common/http/answers.py) as one line."""
    error = (document or {}).get("error")
    if isinstance(error, dict):
        reason = f"{error.get('status', '')}: {error.get('reason', '')}"
    else:
        reason = answer[:200].decode("utf-8", "replace").replace("\n", " ") or "no body"
    code = EXIT_USAGE if 400 <= status < 500 else EXIT_FAILED
    return AdminError(f"{what} answered {status} {reason}", exit_code=code)


def _cause(error: BaseException) -> str:
    """A connection error in words (`Connection refused`, `timed out`), not its repr."""
    return getattr(error, "strerror", None) or str(error) or type(error).__name__
