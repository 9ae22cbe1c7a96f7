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

import time
from collections.abc import Sequence
from types import TracebackType

from mqstore.client.calls import base_path
from mqstore.client.connection import RetryingConnection
from mqstore.client.consumer_calls import ConsumerState, ReceivedMessage, Request, read_answer
from mqstore.services.auth.http_signature import signer_for

DEFAULT_WAIT_MS = 5_000
"""How long a poll waits for new messages by default: short enough for a loop to notice a
stop request, long enough that an idle consumer costs one request per 5 s."""
JSON_HEADERS = {"Content-Type": "application/json"}


class Consumer:
    def __init__(self, url: str, group: str, topic: str, *, tags: Sequence[str] | None = None,
                 timeout_s: float = 10.0, retries_max: int = 3, backoff_initial_ms: int = 50,
                 backoff_max_ms: int = 2000, access_key: str | None = None,
                 secret_key: str | None = None) -> None:
        """`access_key`, `secret_key`: an account of the services' users file; every
        request is then signed (docs/http-api.md).  Neither: unsigned requests."""
        parts, prefix = base_path(url)
        self._http = RetryingConnection(parts, timeout_s=timeout_s, retries_max=retries_max,
                                        backoff_initial_ms=backoff_initial_ms,
                                        backoff_max_ms=backoff_max_ms,
                                        signer=signer_for(access_key, secret_key))
        self._state = ConsumerState(prefix, group, topic, tags=tags)

    @property
    def positions(self) -> dict[int, int]:
        """Per queue, the next offset after what `poll` returned."""
        return dict(self._state.positions)

    def poll(self, max_messages: int = 32, wait_ms: int = DEFAULT_WAIT_MS
             ) -> list[ReceivedMessage]:
        """Up to `max_messages` new messages, waiting up to `wait_ms` for some."""
        deadline_s = time.monotonic() + wait_ms / 1000
        remaining_ms = wait_ms  # the first request asks for exactly what the caller did
        while True:
            before = dict(self._state.positions)
            request = self._state.poll_request(max_messages=max_messages, wait_ms=remaining_ms)
            messages = self._state.take(request, self._call(request, wait_ms=remaining_ms))
            # Empty but moved (a tag filter skipped entries): ask again while time remains.
            if messages or self._state.positions == before or remaining_ms == 0:
                return messages
            remaining_ms = max(0, int((deadline_s - time.monotonic()) * 1000))

    def commit(self) -> None:
        """Commit the offsets past every message `poll` returned (nothing if none moved)."""
        request = self._state.commit_request()
        if request is not None:
            self._state.committed_by(request, self._call(request, wait_ms=0))

    def close(self) -> None:
        """Close the connection; uncommitted messages will be delivered again."""
        self._http.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _call(self, request: Request, *, wait_ms: int) -> dict[str, object]:
        # a held poll answers after its wait: the timeout runs on top of it
        http_status, body = self._http.exchange(request.method, request.path, request.body,
                                                JSON_HEADERS, wait_s=wait_ms / 1000)
        return read_answer(request, http_status, body)
