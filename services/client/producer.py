"""`Producer`: blocking sends over one keep-alive HTTP connection (standard library only).

    with Producer("http://writer:8081") as producer:
        result = producer.send("Orders", b"...", keys=("order-17",))
        results = producer.send_batch([OutgoingMessage("Orders", b"a"), ...])

Retries: a 503 or a connection failure is retried up to `retries_max` times with
exponential backoff and jitter (honouring Retry-After); 4xx, 500 and 507 are not.  A retry
after a connection broke mid-request may store a message twice (at-least-once, as
RocketMQ's producer retries are): give messages keys if duplicates matter.  One `Producer`
is one connection: use one per thread.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterable, Mapping, Sequence
from time import sleep as _sleep
from types import TracebackType

from mqstore.services.common.wire import WireMessage

from .backoff import Backoff
from .calls import Call, base_path, batch_call, message_call
from .errors import UnavailableError
from .results import SendResult, retry_after_s


class Producer:
    def __init__(self, url: str, *, timeout_s: float = 10.0, retries_max: int = 3,
                 backoff_initial_ms: int = 50, backoff_max_ms: int = 2000) -> None:
        parts, self._prefix = base_path(url)
        self._connection_class = (http.client.HTTPSConnection if parts.scheme == "https"
                                  else http.client.HTTPConnection)
        self._host = parts.hostname or ""
        self._port = parts.port
        self._timeout_s = timeout_s
        self._backoff = Backoff(retries_max=retries_max, initial_ms=backoff_initial_ms,
                                max_ms=backoff_max_ms)
        self._connection: http.client.HTTPConnection | None = None

    def send(self, topic: str, body: bytes | str, *, queue_id: int | None = None,
             tags: str | None = None, keys: Sequence[str] = (),
             properties: Mapping[str, str] | None = None) -> SendResult:
        """Store one message (`str` bodies are sent as UTF-8 text)."""
        call = message_call(self._prefix, topic, body, queue_id=queue_id, tags=tags,
                            keys=keys, properties=properties)
        return self._call(call)[0]

    def send_batch(self, messages: Iterable[WireMessage]) -> list[SendResult]:
        """Store messages of any topics in one request, all or nothing."""
        return self._call(batch_call(self._prefix, messages))

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _call(self, call: Call) -> list[SendResult]:
        backoff = self._backoff
        for attempt in range(backoff.retries_max + 1):
            last = attempt == backoff.retries_max
            try:
                http_status, retry_after, body = self._post(call)
            except (OSError, http.client.HTTPException) as error:
                self.close()
                if last:
                    raise UnavailableError(f"POST {call.path}: no answer after {attempt + 1} "
                                           f"attempts: {error!r}") from error
                _sleep(backoff.delay_s(attempt))
                continue
            if http_status == 503 and not last:
                _sleep(backoff.delay_s(attempt, retry_after_s=retry_after_s(retry_after)))
                continue
            return call.answer(http_status, body)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _post(self, call: Call) -> tuple[int, str | None, bytes]:
        if self._connection is None:
            self._connection = self._connection_class(self._host, self._port,
                                                      timeout=self._timeout_s)
        self._connection.request("POST", call.path, body=call.body, headers=dict(call.headers))
        response = self._connection.getresponse()
        body = response.read()
        return response.status, response.getheader("Retry-After"), body


