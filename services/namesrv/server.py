"""`NamesrvServer`: the name server's listener, one reader per connection, and the expiry scan.

    accept (≤ connections_max; at it, the connection whose open frame is oldest is closed
            to make room, and only if none has one is the new connection refused)
      → read a frame (services/common/links/framing.py): 4-byte length
        (≤ frame_size_bytes_max), the whole frame within frame_read_timeout_ms of its first
        byte, idle ≤ idle_timeout_ms, else close
      → decode (services/notifier/remoting/frame.py; a malformed frame closes the connection)
      → the handler (handlers.py), in order, one request at a time: every handler is a
        table lookup or update that never waits
      → the answer, written once the connection's write buffer is under
        write_buffer_bytes_max (else the connection is closed after write_drain_timeout_ms);
        none for a oneway request

With `tls_cert_file` and `tls_key_file` set, both listeners speak only TLS (the handshake
within frame_read_timeout_ms); a plaintext client fails the handshake at its first bytes
and is closed.

A connection that closes drops the brokers that registered on it (RocketMQ's
`BrokerHousekeepingService.onChannelClose`); every `expiry_scan_interval_ms` the brokers
silent for `broker_expiry_ms` are dropped.  Unknown codes answer REQUEST_CODE_NOT_SUPPORTED
(3) with a remark naming the code; a `RemotingError` its code and remark; any other
exception SYSTEM_ERROR with its text, logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import ssl

from mqstore.services.common.links.framing import (
    FramedStream,
    FrameLimits,
    FrameWatchdog,
    make_room,
    start_framed_server,
)
from mqstore.services.namesrv.handlers import HANDLERS, Namesrv
from mqstore.services.notifier.remoting.codes import SYSTEM_ERROR, RemotingError, not_supported
from mqstore.services.notifier.remoting.frame import Command, FrameError, decode, encode

log = logging.getLogger("mqstore.namesrv")


class NamesrvServer:
    def __init__(self, namesrv: Namesrv, *, ssl_context: ssl.SSLContext | None = None
                 ) -> None:
        """`ssl_context`: both listeners serve only TLS; None: plain TCP."""
        self.namesrv = namesrv
        self._ssl = ssl_context
        settings = namesrv.settings
        self._watchdog = FrameWatchdog(FrameLimits(
            frame_size_bytes_max=settings.frame_size_bytes_max,
            frame_read_timeout_ms=settings.frame_read_timeout_ms,
            write_buffer_bytes_max=settings.write_buffer_bytes_max,
            write_drain_timeout_ms=settings.write_drain_timeout_ms,
            idle_timeout_ms=settings.idle_timeout_ms, setting_prefix="namesrv "))
        self._servers: list[asyncio.Server] = []
        self._streams: dict[int, FramedStream] = {}
        self._connections: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._expiry: asyncio.Task[None] | None = None
        self.port = 0
        self.external_port = 0

    @property
    def connections_open(self) -> int:
        return len(self._streams)

    async def start(self) -> int:
        settings = self.namesrv.settings
        self.port = await self._listen(settings.port, external=False)
        if settings.external_port:
            self.external_port = await self._listen(settings.external_port, external=True)
        self._expiry = asyncio.create_task(self._expire_forever(), name="namesrv-expiry")
        return self.port

    async def _listen(self, port: int, *, external: bool) -> int:
        settings = self.namesrv.settings
        server = await start_framed_server(
            functools.partial(self._serve, external=external), settings.host, port,
            ssl_context=self._ssl,
            ssl_handshake_timeout_s=settings.frame_read_timeout_ms / 1000)
        self._servers.append(server)
        bound = int(server.sockets[0].getsockname()[1])
        log.info("namesrv listening", extra={"host": settings.host, "port": bound,
                                             "external": external,
                                             "tls": self._ssl is not None})
        return bound

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._watchdog.stop()
        for server in self._servers:
            await server.wait_closed()

    def expire(self) -> list[str]:
        """Drop the brokers silent for `broker_expiry_ms` now; their addresses."""
        namesrv = self.namesrv
        gone = namesrv.routes.expire(now_ms=namesrv.now_ms(),
                                     expiry_ms=namesrv.settings.broker_expiry_ms)
        for address in gone:
            log.warning("broker %s expired: silent for %d ms (namesrv broker_expiry_ms)",
                        address, namesrv.settings.broker_expiry_ms)
        return gone

    async def _expire_forever(self) -> None:
        while True:
            await asyncio.sleep(self.namesrv.settings.expiry_scan_interval_ms / 1000)
            self.expire()

    def _admit(self) -> bool:
        return make_room(self._streams, connections_max=self.namesrv.settings.connections_max,
                         setting="namesrv connections_max", logger=log)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                     external: bool) -> None:
        task = asyncio.current_task()
        assert task is not None
        if not self._admit():
            writer.close()
            return
        self._connections.add(task)
        peer = writer.get_extra_info("peername") or ("?", 0)
        connection_id = next(self._ids)
        stream = self._watchdog.open_stream(reader, writer)
        self._streams[connection_id] = stream
        if external:
            self.namesrv.external_connections.add(connection_id)
        try:
            while (payload := await stream.read_frame()) is not None:
                request = decode(payload)
                answer = self.answer(request, connection_id)
                if answer is not None and not request.oneway:
                    await stream.write(encode(answer))
        except (FrameError, ConnectionError) as error:
            log.info("closed %s:%s: %s", peer[0], peer[1], error)
        except asyncio.CancelledError:
            log.debug("closed %s:%s: the name server stops", peer[0], peer[1])
        finally:
            self._streams.pop(connection_id, None)
            self.namesrv.external_connections.discard(connection_id)
            self._watchdog.forget(stream)
            for address in self.namesrv.routes.connection_closed(connection_id):
                log.warning("broker %s dropped: its connection closed", address)
            stream.close()
            self._connections.discard(task)

    def answer(self, request: Command, connection_id: int) -> Command | None:
        """The answer to one request (None for a response frame: nothing is called here)."""
        if request.is_response:
            return None
        handler = HANDLERS.get(request.code)
        try:
            if handler is None:
                raise not_supported(request.code)
            return handler(self.namesrv, request, connection_id)
        except RemotingError as error:
            return request.answer(error.code, remark=error.remark)
        except Exception as error:  # a bug in one handler answers, never hangs the client
            log.exception("request code %d failed", request.code)
            return request.answer(SYSTEM_ERROR, remark=f"{type(error).__name__}: {error}")
