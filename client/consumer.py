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

from collections.abc import Sequence
from types import TracebackType

from mqstore.client.calls import base_path
from mqstore.client.connection import RetryingConnection
from mqstore.client.consumer_calls import ConsumerState, ReceivedMessage, Request, read_answer
from mqstore.client.retries import (
    DEFAULT_RETRY_POLL_INTERVAL_MS,
    NackResult,
    PollRound,
    RetryPolling,
)
from mqstore.services.auth.http_signature import signer_for

DEFAULT_WAIT_MS = 5_000
"""How long a poll waits for new messages by default: short enough for a loop to notice a
stop request, long enough that an idle consumer costs one request per 5 s."""
JSON_HEADERS = {"Content-Type": "application/json"}


class Consumer:
    def __init__(self, url: str, group: str, topic: str, *, tags: Sequence[str] | None = None,
                 timeout_s: float = 10.0, retries_max: int = 3, backoff_initial_ms: int = 50,
                 backoff_max_ms: int = 2000, access_key: str | None = None,
                 secret_key: str | None = None, poll_retries: bool = True,
                 retry_poll_interval_ms: int = DEFAULT_RETRY_POLL_INTERVAL_MS) -> None:
        """`access_key`, `secret_key`: an account of the services' users file; every
        request is then signed (docs/http-api.md).  Neither: unsigned requests."""
        parts, prefix = base_path(url)
        self._http = RetryingConnection(parts, timeout_s=timeout_s, retries_max=retries_max,
                                        backoff_initial_ms=backoff_initial_ms,
                                        backoff_max_ms=backoff_max_ms,
                                        signer=signer_for(access_key, secret_key))
        self._state = ConsumerState(prefix, group, topic, tags=tags)
        self._retries = RetryPolling(prefix, group, poll_interval_ms=retry_poll_interval_ms)
        self._poll_retries = poll_retries

    @property
    def positions(self) -> dict[int, int]:
        """Per queue, the next offset after what `poll` returned."""
        return dict(self._state.positions)

    def poll(self, max_messages: int = 32, wait_ms: int = DEFAULT_WAIT_MS
             ) -> list[ReceivedMessage]:
        """Up to `max_messages` new messages (of the topic or, when due, of the group's retry
        topic), waiting up to `wait_ms` for some."""
        poll = PollRound(self._state, self._retries if self._poll_retries else None,
                         max_messages=max_messages, wait_ms=wait_ms)
        while (step := poll.next()) is not None:
            messages = poll.answered(step, self._call(step.request, wait_ms=step.wait_ms))
            if messages:
                return messages
        return []

    def nack(self, message: ReceivedMessage, *, delay_level: int = 0,
             max_reconsume_times: int | None = None) -> NackResult:
        """Have `message` come again later, or go to the group's dead letter queue past
        `max_reconsume_times` (default: the notifier's, 16): see retries.py.  Commit as
        for any other message."""
        request = self._retries.nack_request(message, delay_level=delay_level,
                                             max_reconsume_times=max_reconsume_times)
        return self._retries.nacked(request, self._call(request, wait_ms=0))

    def commit(self) -> None:
        """Commit the offsets past every message `poll` returned (nothing if none moved)."""
        for state in (self._state, self._retries.state):
            request = state.commit_request()
            if request is not None:
                state.committed_by(request, self._call(request, wait_ms=0))

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
