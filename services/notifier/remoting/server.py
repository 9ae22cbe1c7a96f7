"""`RemotingServer`: the listener, one reader per connection, one task per request.

With `remoting.external_enabled` a second listener on `external_port` takes the same
requests under the same bounds (one `connections_max` for both, one TLS context, one users
file); its connections are marked external, so the routes and cluster info they are
answered name `external_advertised_address` (route.py).

    accept (≤ connections_max; at it, the connection whose open frame is oldest is closed
            to make room, and only if none has one is the new connection refused)
      → read a frame (services/common/links/framing.py): 4-byte length (≤ frame_size_bytes_max),
        the whole frame within frame_read_timeout_ms of its first byte, else close
      → decode (a malformed frame closes: the next frame cannot be found after it)
      → a task per request (≤ requests_in_flight_per_connection_max per connection), so a
        held pull never blocks the requests behind it on the same socket; a send takes no
        task: it is checked and forwarded to the writer as it is read, and answered from
        the callback of the writer's answer (the same checks, codes and bounds as the task
        path, which takes it when the writer link is not connected or its buffer is full)
      → the handler's answer, written as soon as it is ready (clients match by opaque);
        none for a oneway request (flag bit 1)

Flow control: while more than `write_buffer_bytes_max` of answers wait for the client to
read them, the connection's requests are not read and each new answer waits its turn; a
buffer that does not drain within `write_drain_timeout_ms` closes the connection and drops
the buffer.  A client that pipelines 1,000 pulls and reads nothing costs that bound and at
most 16 answers more (`FramedStream.settle`, services/common/links/framing.py), not 1,000
answers.

The server also writes requests of its own to clients (`push`, oneway, as RocketMQ's
broker does): NOTIFY_CONSUMER_IDS_CHANGED to a group's consumers when one joins or leaves
(they rebalance at once instead of on their 20 s timer), RESET_CONSUMER_CLIENT_OFFSET to a
group's consumers when its offsets are reset.  A push to a client that is not reading is
dropped (it rebalances on its timer all the same).

With a users file, every request is checked first (access.py: signature, then the code's
permissions; NO_PERMISSION otherwise).  Unknown codes answer REQUEST_CODE_NOT_SUPPORTED (3)
with a remark naming the code; a `RemotingError` answers its code and remark; any other
exception answers SYSTEM_ERROR (1) with its text, and is logged.  A connection idle
`idle_timeout_ms` is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import ssl
from collections.abc import Callable, Coroutine
from typing import Any

from mqstore.services.common.links.forward_wire import ForwardAnswer, ForwardRequest
from mqstore.services.common.links.framing import (
    FramedStream,
    FrameLimits,
    FrameWatchdog,
    make_room,
    start_framed_server,
)
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting import send
from mqstore.services.notifier.remoting.clients import notify_group_changed
from mqstore.services.notifier.remoting.codes import (
    SEND_BATCH_MESSAGE,
    SEND_MESSAGE,
    SEND_MESSAGE_V2,
    SYSTEM_ERROR,
    RemotingError,
    not_supported,
)
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command, FrameError, decode, encode
from mqstore.services.notifier.remoting.routing import HANDLERS

log = logging.getLogger("mqstore.remoting")

SEND_CODES = frozenset((SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE))
"""Handled inline (`RemotingServer._send_inline`): most of a producer's traffic."""


def frame_limits(settings: RemotingSettings) -> FrameLimits:
    return FrameLimits(frame_size_bytes_max=settings.frame_size_bytes_max,
                       frame_read_timeout_ms=settings.frame_read_timeout_ms,
                       write_buffer_bytes_max=settings.write_buffer_bytes_max,
                       write_drain_timeout_ms=settings.write_drain_timeout_ms,
                       idle_timeout_ms=settings.idle_timeout_ms, setting_prefix="remoting.")


class RemotingServer:
    def __init__(self, front: Front, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.front = front
        self._ssl = ssl_context
        """TLS on the listener (services/common/settings/tls.py): RocketMQ clients with
        `setUseTLS(true)`; a plaintext client is refused at its first bytes."""
        self._settings = front.settings
        self._watchdog = FrameWatchdog(frame_limits(front.settings))
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._streams: dict[int, FramedStream] = {}
        """Open connections by id: what counts toward `connections_max`."""
        self._ids = itertools.count(1)
        self._writes: set[asyncio.Task[None]] = set()
        """Answers of inline sends that wait for room in their connection's buffer."""
        self.port = 0
        self.external_port = 0
        """The external listener's port once started (0: none)."""
        front.push = self.push

    @property
    def connections_open(self) -> int:
        return len(self._streams)

    def push(self, connection_id: int, command: Command) -> bool:
        """Write a oneway request of the server's own to a client connection (False: the
        connection is gone, or not reading its answers)."""
        stream = self._streams.get(connection_id)
        if stream is None or stream.writer.is_closing():
            return False
        return stream.write_nowait(encode(command))

    async def start(self) -> int:
        settings = self._settings
        self.port = await self._listen(settings.port, external=False)
        if settings.external_enabled:
            self.external_port = await self._listen(settings.external_port, external=True)
        return self.port

    async def _listen(self, port: int, *, external: bool) -> int:
        # a client that never finishes its TLS handshake is dropped like a slow frame
        server = await start_framed_server(
            functools.partial(self._serve, external=external), self._settings.host, port,
            ssl_context=self._ssl,
            ssl_handshake_timeout_s=self._settings.frame_read_timeout_ms / 1000)
        self._servers.append(server)
        bound = int(server.sockets[0].getsockname()[1])
        address = self._settings.external_address if external else \
            self.front.broker_address
        log.info("remoting listening", extra={"host": self._settings.host, "port": bound,
                                              "tls": self._ssl is not None,
                                              "external": external,
                                              "broker_address": address})
        return bound

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._watchdog.stop()
        for server in self._servers:
            await server.wait_closed()

    def _admit(self) -> bool:
        """Room for one more connection: at `connections_max`, close the one whose open
        frame began longest ago (a slow sender's); False if every one is between frames."""
        return make_room(self._streams, connections_max=self._settings.connections_max,
                         setting="connections_max", logger=log)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                     external: bool) -> None:
        task = asyncio.current_task()
        assert task is not None
        if not self._admit():
            writer.close()
            return
        self._connections.add(task)
        peer_name = writer.get_extra_info("peername") or ("0.0.0.0", 0)
        host = f"[{peer_name[0]}]" if ":" in peer_name[0] else peer_name[0]
        peer = Peer(f"{host}:{peer_name[1]}", next(self._ids), external)
        stream = self._watchdog.open_stream(reader, writer)
        self._streams[peer.connection_id] = stream
        try:
            await self._read_loop(stream, peer)
        except (FrameError, ConnectionError) as error:
            log.info("closed %s: %s", peer.address, error)
        except asyncio.CancelledError:  # close() (issue 22/14): 3.11's start_server logs a cancelled connection task with a traceback  # noqa: E501
            log.debug("closed %s: the front stops", peer.address)
        finally:
            self._streams.pop(peer.connection_id, None)
            self._watchdog.forget(stream)
            for group in self.front.clients.connection_closed(peer.connection_id):
                notify_group_changed(self.front, group)
            stream.close()
            self._connections.discard(task)

    async def _read_loop(self, stream: FramedStream, peer: Peer) -> None:
        slots = asyncio.Semaphore(self._settings.requests_in_flight_per_connection_max)
        pending: set[asyncio.Task[None]] = set()
        try:
            while (payload := await stream.read_frame()) is not None:
                request = decode(payload)
                await slots.acquire()
                if request.code in SEND_CODES and not request.is_response:
                    later = self._send_inline(request, stream, peer, slots.release)
                    if later is None:
                        await stream.settle()
                        continue
                else:
                    later = self._handle(request, stream, peer)
                handling = asyncio.create_task(later)
                pending.add(handling)
                handling.add_done_callback(pending.discard)
                handling.add_done_callback(lambda _: slots.release())
                await stream.settle()
        finally:
            for handling in pending:
                handling.cancel()

    async def _handle(self, request: Command, stream: FramedStream, peer: Peer) -> None:
        answer = await answer_to(self.front, request, peer)
        if answer is not None and not request.oneway and not stream.writer.is_closing():
            with contextlib.suppress(ConnectionError):  # the read loop closes and logs it
                await stream.write(encode(answer))

    def _send_inline(self, request: Command, stream: FramedStream, peer: Peer,
                     release: Callable[[], None]) -> Coroutine[Any, Any, None] | None:
        """A send, handled without a task: checked and forwarded here, answered from the
        writer's answer's callback (then `release`); None.  When the link cannot take it
        now (not connected, or its buffer is full), the coroutine that forwards the
        checked send once it can, for the caller to run as a task (which releases)."""
        front = self.front
        try:
            if front.access is not None:
                front.access.check(request, peer.address)
            forward = send.forward_of(front, request, peer)
            future = front.link.send_nowait(forward)
        except RemotingError as error:
            self._reply(request, request.answer(error.code, remark=error.remark), stream)
            release()
            return None
        if future is None:
            return self._send_later(request, forward, stream)
        future.add_done_callback(functools.partial(self._sent, request, forward, stream,
                                                   release))
        return None

    async def _send_later(self, request: Command, forward: ForwardRequest,
                          stream: FramedStream) -> None:
        outcome: ForwardAnswer | Exception
        try:
            outcome = await self.front.link.send(forward)
        except Exception as error:  # answered as the inline path answers it
            outcome = error
        self._reply(request, self._send_answer(request, forward, outcome), stream)

    def _sent(self, request: Command, forward: ForwardRequest, stream: FramedStream,
              release: Callable[[], None], future: asyncio.Future[ForwardAnswer]) -> None:
        release()
        if future.cancelled():
            return  # the front stops
        outcome = future.exception()
        self._reply(request, self._send_answer(
            request, forward, future.result() if outcome is None else outcome), stream)

    def _send_answer(self, request: Command, forward: ForwardRequest,
                     outcome: ForwardAnswer | BaseException) -> Command:
        """The client's answer to a forwarded send: the writer's answer, or why there is
        none (a refusal's code, or SYSTEM_ERROR: a bug answers, never hangs the client)."""
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            return send.answer_of(self.front, request, forward, outcome)
        except RemotingError as error:
            return request.answer(error.code, remark=error.remark)
        except Exception as error:
            log.exception("request code %d failed", request.code)
            return request.answer(SYSTEM_ERROR, remark=f"{type(error).__name__}: {error}")

    def _reply(self, request: Command, answer: Command, stream: FramedStream) -> None:
        """Write an answer from a callback: now, or from a task if the buffer is full."""
        if request.oneway or stream.writer.is_closing():
            return
        parts = encode(answer)
        with contextlib.suppress(ConnectionError):
            if stream.write_nowait(parts):
                return
        writing = asyncio.create_task(self._write_later(parts, stream))
        self._writes.add(writing)
        writing.add_done_callback(self._writes.discard)

    @staticmethod
    async def _write_later(parts: list[bytes], stream: FramedStream) -> None:
        with contextlib.suppress(ConnectionError):  # the read loop closes and logs it
            await stream.write(parts)


async def answer_to(front: Front, request: Command, peer: Peer) -> Command | None:
    """The answer to one request (None for none), whatever the handler does."""
    if request.is_response:  # a client's answer to a call of the server's (server_calls.py)
        front.calls.answered(request, peer.connection_id)
        return None
    handler = HANDLERS.get(request.code)
    try:
        if front.access is not None:
            front.access.check(request, peer.address)
        if handler is None:
            raise not_supported(request.code)
        return await handler(front, request, peer)
    except RemotingError as error:
        return request.answer(error.code, remark=error.remark)
    except asyncio.CancelledError:
        raise
    except Exception as error:  # a bug in one handler answers, never hangs the client
        log.exception("request code %d failed", request.code)
        with contextlib.suppress(Exception):
            return request.answer(SYSTEM_ERROR, remark=f"{type(error).__name__}: {error}")
        return None
