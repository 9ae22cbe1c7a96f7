"""`RemotingServer`: the listener, one reader per connection, one task per request.

    accept (≤ connections_max, else close)
      → read a frame: 4-byte length (≤ frame_size_bytes_max, else close), then the frame
      → decode (a malformed frame closes: the next frame cannot be found after it)
      → a task per request (≤ requests_in_flight_per_connection_max per connection), so a
        held pull never blocks the requests behind it on the same socket
      → the handler's answer, written as soon as it is ready (clients match by opaque);
        none for a oneway request (flag bit 1)

The server also writes requests of its own to clients (`push`, oneway, as RocketMQ's
broker does): NOTIFY_CONSUMER_IDS_CHANGED to a group's consumers when one joins or leaves
(they rebalance at once instead of on their 20 s timer), RESET_CONSUMER_CLIENT_OFFSET to a
group's consumers when its offsets are reset.

With a users file, every request is checked first (access.py: signature, then the code's
permissions; NO_PERMISSION otherwise).  Unknown codes answer REQUEST_CODE_NOT_SUPPORTED (3)
with a remark naming the code; a `RemotingError` answers its code and remark; any other
exception answers SYSTEM_ERROR (1) with its text, and is logged.  A connection idle
`idle_timeout_ms` is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl

from .clients import notify_group_changed
from .codes import SYSTEM_ERROR, RemotingError, not_supported
from .context import Front, Peer
from .dispatch import HANDLERS
from .frame import Command, FrameError, decode, encode

log = logging.getLogger("mqstore.remoting")


class RemotingServer:
    def __init__(self, front: Front, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.front = front
        self._ssl = ssl_context
        """TLS on the listener (services/common/tls_settings.py): RocketMQ clients with
        `setUseTLS(true)`; a plaintext client is refused at its first bytes."""
        self._settings = front.settings
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self._ids = itertools.count(1)
        self.port = 0
        front.push = self.push

    def push(self, connection_id: int, command: Command) -> bool:
        """Write a oneway request of the server's own to a client connection."""
        writer = self._writers.get(connection_id)
        if writer is None or writer.is_closing():
            return False
        writer.writelines(encode(command))
        return True

    async def start(self) -> int:
        settings = self._settings
        if self._ssl is None:
            self._server = await asyncio.start_server(self._serve, settings.host, settings.port)
        else:  # a client that never finishes its TLS handshake is dropped like an idle one
            self._server = await asyncio.start_server(
                self._serve, settings.host, settings.port, ssl=self._ssl,
                ssl_handshake_timeout=settings.idle_timeout_ms / 1000)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("remoting listening", extra={"host": self._settings.host, "port": self.port,
                                              "tls": self._ssl is not None,
                                              "broker_address": self.front.broker_address})
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._connections) >= self._settings.connections_max:
            log.warning("refused a connection: %d open (connections_max)",
                        len(self._connections))
            writer.close()
            return
        self._connections.add(task)
        peer_name = writer.get_extra_info("peername") or ("0.0.0.0", 0)
        host = f"[{peer_name[0]}]" if ":" in peer_name[0] else peer_name[0]
        peer = Peer(f"{host}:{peer_name[1]}", next(self._ids))
        self._writers[peer.connection_id] = writer
        try:
            await self._read_loop(reader, writer, peer)
        except (FrameError, ConnectionError, asyncio.IncompleteReadError, TimeoutError) as error:
            if not isinstance(error, asyncio.IncompleteReadError) or error.partial:
                log.info("closed %s: %s", peer.address, error)
        finally:
            del self._writers[peer.connection_id]
            for group in self.front.clients.connection_closed(peer.connection_id):
                notify_group_changed(self.front, group)
            writer.close()
            self._connections.discard(task)

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         peer: Peer) -> None:
        settings = self._settings
        idle_s = settings.idle_timeout_ms / 1000
        slots = asyncio.Semaphore(settings.requests_in_flight_per_connection_max)
        pending: set[asyncio.Task[None]] = set()
        try:
            while True:
                head = await asyncio.wait_for(reader.readexactly(4), idle_s)
                length = int.from_bytes(head, "big")
                if length > settings.frame_size_bytes_max:
                    raise FrameError(f"frame of {length} bytes is over frame_size_bytes_max="
                                     f"{settings.frame_size_bytes_max}")
                request = decode(await reader.readexactly(length))
                await slots.acquire()
                handling = asyncio.create_task(self._handle(request, writer, peer))
                pending.add(handling)
                handling.add_done_callback(pending.discard)
                handling.add_done_callback(lambda _: slots.release())
        finally:
            for handling in pending:
                handling.cancel()

    async def _handle(self, request: Command, writer: asyncio.StreamWriter,
                      peer: Peer) -> None:
        answer = await answer_to(self.front, request, peer)
        if answer is not None and not request.oneway and not writer.is_closing():
            writer.writelines(encode(answer))


async def answer_to(front: Front, request: Command, peer: Peer) -> Command | None:
    """The answer to one request (None for none), whatever the handler does."""
    if request.is_response:
        return None  # an answer to a request this server never sends: nothing to do
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
