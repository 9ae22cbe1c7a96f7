"""`RetryingConnection`: the blocking clients' one keep-alive HTTP connection and retry rule.

A connection failure or a 503 is retried up to `retries_max` times with exponential backoff
and jitter, never sooner than Retry-After (backoff.py); after a failure the connection is
reopened.  With a `Signer`, each attempt is signed (services/auth/http_signature.py).
Every other answer goes back to the caller as it came: 4xx, 500 and 507 are the
caller's to turn into errors.  When the retries run out, a 503 is returned too, and a
connection failure raises `UnavailableError`.  Standard library only.
"""

from __future__ import annotations

import http.client
from collections.abc import Mapping
from time import sleep as _sleep
from urllib.parse import SplitResult

from mqstore.client.backoff import Backoff
from mqstore.client.errors import UnavailableError
from mqstore.client.results import retry_after_s
from mqstore.services.auth.http_signature import Signer


class RetryingConnection:
    def __init__(self, parts: SplitResult, *, timeout_s: float, retries_max: int,
                 backoff_initial_ms: int, backoff_max_ms: int,
                 signer: Signer | None = None) -> None:
        """`signer`: sign every attempt afresh (its timestamp must be recent)."""
        self._signer = signer
        self._connection_class = (http.client.HTTPSConnection if parts.scheme == "https"
                                  else http.client.HTTPConnection)
        self._host = parts.hostname or ""
        self._port = parts.port
        self._timeout_s = timeout_s
        self._backoff = Backoff(retries_max=retries_max, initial_ms=backoff_initial_ms,
                                max_ms=backoff_max_ms)
        self._connection: http.client.HTTPConnection | None = None

    def exchange(self, method: str, path: str, body: bytes | None,
                 headers: Mapping[str, str], *, wait_s: float = 0.0) -> tuple[int, bytes]:
        """(HTTP status, body) of the request, retried as the module says.  `wait_s`: how
        long the server may hold it before answering (a long poll), on top of the timeout."""
        backoff = self._backoff
        for attempt in range(backoff.retries_max + 1):
            last = attempt == backoff.retries_max
            try:
                http_status, retry_after, answer = self._send(method, path, body, headers,
                                                              timeout_s=self._timeout_s + wait_s)
            except (OSError, http.client.HTTPException) as error:
                self.close()
                if last:
                    raise UnavailableError(f"{method} {path}: no answer after {attempt + 1} "
                                           f"attempts: {error!r}") from error
                _sleep(backoff.delay_s(attempt))
                continue
            if http_status == 503 and not last:
                _sleep(backoff.delay_s(attempt, retry_after_s=retry_after_s(retry_after)))
                continue
            return http_status, answer
        raise AssertionError("unreachable: the last attempt returns or raises")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _send(self, method: str, path: str, body: bytes | None, headers: Mapping[str, str],
              *, timeout_s: float) -> tuple[int, str | None, bytes]:
        if self._connection is None:
            self._connection = self._connection_class(self._host, self._port,
                                                      timeout=timeout_s)
        connection = self._connection
        if connection.timeout != timeout_s:
            connection.timeout = timeout_s
            if connection.sock is not None:
                connection.sock.settimeout(timeout_s)
        sent = dict(headers)
        if self._signer is not None:
            sent.update(self._signer.headers(method, path, body))
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        answer = response.read()
        return response.status, response.getheader("Retry-After"), answer
