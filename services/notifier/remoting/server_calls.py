"""`ServerCalls`: requests the front sends to a client and awaits the answer of.

RocketMQ's broker calls a client synchronously in one case served here: pushing a reply to
its requester (PUSH_REPLY_MESSAGE_TO_CLIENT, 326: reply.py).  The call is written on the
client's connection with an opaque of the front's own (`Front.opaques`); the client's answer
comes back on that connection as a response frame, which the server hands here by its
opaque (server.py, `answer_to`).  An answer nobody waits for (late, forged, or from
another connection than the one called) is dropped.

Bounds: at most `calls_max` calls wait at once (one more fails at once: `CallRefused`), and
each waits at most the timeout it is given, so a client that never answers costs one
entry for that long and nothing after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mqstore.services.notifier.remoting.frame import Command


class CallRefused(Exception):
    """The call was not made, or not answered in time: the reason is the message."""


class ServerCalls:
    def __init__(self, *, calls_max: int) -> None:
        self._calls_max = calls_max
        self._waiting: dict[int, tuple[int, asyncio.Future[Command]]] = {}
        """Opaque -> (the connection called, its answer)."""

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def call(self, push: Callable[[int, Command], bool], connection_id: int,
                   request: Command, *, timeout_ms: int) -> Command:
        """Write `request` (its opaque unique among the front's own) on `connection_id`
        through `push` and return the client's answer; `CallRefused` if it cannot be
        written, too many calls wait, or no answer comes within `timeout_ms`."""
        if len(self._waiting) >= self._calls_max:
            raise CallRefused(f"{len(self._waiting)} calls to clients wait for answers "
                              f"(remoting.server_calls_max)")
        assert request.opaque not in self._waiting, "an opaque names one call"
        answer: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._waiting[request.opaque] = (connection_id, answer)
        try:
            if not push(connection_id, request):
                raise CallRefused(f"connection {connection_id} is gone or not reading")
            async with asyncio.timeout(timeout_ms / 1000):
                return await answer
        except TimeoutError:
            raise CallRefused(f"no answer in {timeout_ms} ms") from None
        finally:
            self._waiting.pop(request.opaque, None)

    def answered(self, response: Command, connection_id: int) -> bool:
        """A client's answer, come on `connection_id`, to one of the front's calls; False if
        no call to that connection waits for it."""
        waiting = self._waiting.get(response.opaque)
        if waiting is None or waiting[0] != connection_id or waiting[1].done():
            return False
        del self._waiting[response.opaque]
        waiting[1].set_result(response)
        return True
