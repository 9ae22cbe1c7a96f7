"""`Consumer`: a consumer group member polling one topic through the pull-notifier (blocking,
standard library only, one keep-alive connection).

    with Consumer("http://notifier:8083", "billing", "Orders") as consumer:
        while True:
            for message in consumer.poll(max_messages=32, wait_ms=5000):
                handle(message)
            consumer.commit()

`poll` returns up to `max_messages` messages from the queues of the topic, waiting up to
`wait_ms` for new ones (the notifier holds the request until data arrives: long polling).
`commit` records, for the group, the offsets past everything `poll` has returned so far.

Delivery is at least once: messages polled but not committed are delivered again to the
next consumer of the group that starts (after a crash, a restart, or `close` without
`commit`), from the group's committed offsets.  Commit after handling, not before.

Retries: a 503 or a connection failure is retried up to `retries_max` times with
exponential backoff and jitter (honouring Retry-After); both calls are safe to repeat (a poll
reads; a commit never moves an offset back).  Errors are `mqstore.client`'s: 4xx raise
`BadRequestError`, exhausted retries `UnavailableError`, anything else `ServerError`.  One
`Consumer` is one connection: use one per thread.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Sequence
from types import TracebackType

from .backoff import Backoff
from .calls import base_path
from .consumer_calls import ConsumerState, ReceivedMessage, Request, read_answer
from .errors import UnavailableError
from .results import retry_after_s

DEFAULT_WAIT_MS = 5_000
"""How long a poll waits for new messages by default: short enough for a loop to notice a
stop request, long enough that an idle consumer costs one request per 5 s."""


class Consumer:
    def __init__(self, url: str, group: str, topic: str, *, tags: Sequence[str] | None = None,
                 timeout_s: float = 10.0, retries_max: int = 3, backoff_initial_ms: int = 50,
                 backoff_max_ms: int = 2000) -> None:
        parts, prefix = base_path(url)
        self._connection_class = (http.client.HTTPSConnection if parts.scheme == "https"
                                  else http.client.HTTPConnection)
        self._host = parts.hostname or ""
        self._port = parts.port
        self._timeout_s = timeout_s
        self._backoff = Backoff(retries_max=retries_max, initial_ms=backoff_initial_ms,
                                max_ms=backoff_max_ms)
        self._state = ConsumerState(prefix, group, topic, tags=tags)
        self._connection: http.client.HTTPConnection | None = None

    @property
    def positions(self) -> dict[int, int]:
        """Per queue, the next offset after what `poll` returned."""
        return dict(self._state.positions)

    def poll(self, max_messages: int = 32, wait_ms: int = DEFAULT_WAIT_MS
             ) -> list[ReceivedMessage]:
        """Up to `max_messages` new messages, waiting up to `wait_ms` for some."""
        deadline_s = time.monotonic() + wait_ms / 1000
        while True:
            before = dict(self._state.positions)
            remaining_ms = max(0, int((deadline_s - time.monotonic()) * 1000))
            request = self._state.poll_request(max_messages=max_messages, wait_ms=remaining_ms)
            messages = self._state.take(request, self._call(request, wait_ms=remaining_ms))
            # Empty but moved (a tag filter skipped entries): ask again while time remains.
            if messages or self._state.positions == before or remaining_ms == 0:
                return messages

    def commit(self) -> None:
        """Commit the offsets past every message `poll` returned (nothing if none moved)."""
        request = self._state.commit_request()
        if request is not None:
            self._state.committed_by(request, self._call(request, wait_ms=0))

    def close(self) -> None:
        """Close the connection; uncommitted messages will be delivered again."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _call(self, request: Request, *, wait_ms: int) -> dict[str, object]:
        backoff = self._backoff
        for attempt in range(backoff.retries_max + 1):
            last = attempt == backoff.retries_max
            try:
                http_status, retry_after, body = self._send(request, wait_ms=wait_ms)
            except (OSError, http.client.HTTPException) as error:
                self.close()
                if last:
                    raise UnavailableError(f"{request.method} {request.path}: no answer after "
                                           f"{attempt + 1} attempts: {error!r}") from error
                time.sleep(backoff.delay_s(attempt))
                continue
            if http_status == 503 and not last:
                time.sleep(backoff.delay_s(attempt, retry_after_s=retry_after_s(retry_after)))
                continue
            return read_answer(request, http_status, body)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _send(self, request: Request, *, wait_ms: int) -> tuple[int, str | None, bytes]:
        timeout_s = self._timeout_s + wait_ms / 1000  # a held poll answers after its wait
        if self._connection is None:
            self._connection = self._connection_class(self._host, self._port,
                                                      timeout=timeout_s)
        connection = self._connection
        connection.timeout = timeout_s
        if connection.sock is not None:
            connection.sock.settimeout(timeout_s)
        connection.request(request.method, request.path, body=request.body,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
        return response.status, response.getheader("Retry-After"), body
