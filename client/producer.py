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

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType

from mqstore.client.calls import Call, base_path, batch_call, message_call
from mqstore.client.connection import RetryingConnection
from mqstore.client.results import SendResult
from mqstore.services.auth.http_signature import signer_for
from mqstore.services.common.http.batch_wire import WireMessage


class Producer:
    def __init__(self, url: str, *, timeout_s: float = 10.0, retries_max: int = 3,
                 backoff_initial_ms: int = 50, backoff_max_ms: int = 2000,
                 access_key: str | None = None, secret_key: str | None = None) -> None:
        """`access_key`, `secret_key`: an account of the services' users file; every
        request is then signed (docs/http-api.md).  Neither: unsigned requests."""
        parts, self._prefix = base_path(url)
        self._http = RetryingConnection(parts, timeout_s=timeout_s, retries_max=retries_max,
                                        backoff_initial_ms=backoff_initial_ms,
                                        backoff_max_ms=backoff_max_ms,
                                        signer=signer_for(access_key, secret_key))

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
        self._http.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _call(self, call: Call) -> list[SendResult]:
        http_status, body = self._http.exchange("POST", call.path, call.body, call.headers)
        return call.answer(http_status, body)
