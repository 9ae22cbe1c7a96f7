"""`NamesrvLink`: the front's one connection to one name server, for its registrations.

A name server drops a broker whose connection closes (RocketMQ's
`BrokerHousekeepingService.onChannelClose`), so the connection stays open between rounds,
as RocketMQ's broker keeps its channel.  Calls are one at a time (the registrar's task for
this name server makes them in turn): write the request, read frames until the answer with
its opaque (services/common/links/framing.py reads them: a frame at most
`frame_size_bytes_max`, whole within `frame_read_timeout_ms`).  The caller bounds each call
with its timeout; a call that fails or times out closes the connection, and the next one
connects again (a call that finds its kept connection closed connects again at once).

With `remoting.namesrv_tls_enabled` the connection is TLS: the registrar gives each link the
context of the config's `tls.ca_file` and the host NAME of its `namesrv_addresses` entry
(the link itself connects to one resolved address), so the name server's certificate must
name that host; a loopback name checks the chain only (services/common/settings/tls.py).
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl

from mqstore.services.common.links.framing import (
    FramedStream,
    FrameWatchdog,
    TransportError,
    open_framed_connection,
)
from mqstore.services.notifier.remoting.frame import Command, decode, encode


class NamesrvLink:
    def __init__(self, host: str, port: int, *, watchdog: FrameWatchdog,
                 ssl_context: ssl.SSLContext | None = None, server_hostname: str = "") -> None:
        """`host`: an address to connect to; `ssl_context`: connect over TLS, checking the
        certificate against `server_hostname` (empty: `host`).  None: plain TCP."""
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self._server_hostname = server_hostname or host
        self._watchdog = watchdog
        self._stream: FramedStream | None = None
        self._opaques = itertools.count(1)

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def next_opaque(self) -> int:
        return next(self._opaques) & 0x7FFFFFFF

    async def call(self, request: Command) -> Command:
        """Send `request` and return its answer (ConnectionError if the link breaks).  Any
        exception, a cancellation by the caller's timeout included, closes the link.  A kept
        connection the name server closed in the meantime (it restarted) is found out only by
        using it: the request is then sent once more on a new connection, so a restarted
        name server hears from the broker this round, not the next (registrations are
        idempotent)."""
        kept = self._stream is not None and not self._stream.writer.is_closing()
        try:
            return await self._call_once(request)
        except ConnectionError:
            if not kept:
                raise
        return await self._call_once(request)

    async def _call_once(self, request: Command) -> Command:
        try:
            stream = await self._connected()
            await stream.write(encode(request))
            while True:
                payload = await stream.read_frame()
                if payload is None:
                    raise TransportError("the name server closed the connection")
                answer = decode(payload)
                if answer.is_response and answer.opaque == request.opaque:
                    return answer
        except BaseException:
            self.close()
            raise

    async def _connected(self) -> FramedStream:
        stream = self._stream
        if stream is not None and not stream.writer.is_closing():
            return stream
        self.close()
        reader, writer = await open_framed_connection(
            self.host, self.port, ssl_context=self._ssl,
            server_hostname=self._server_hostname if self._ssl is not None else None)
        self._stream = self._watchdog.open_stream(reader, writer)
        return self._stream

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            self._watchdog.forget(stream)
            stream.abort()


def split_address(address: str) -> tuple[str, int]:
    """"host:port" (or "[v6]:port") as a host and a port; the settings checked the form."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


async def resolve(address: str, *, timeout_ms: int) -> list[tuple[str, int]]:
    """Every (ip, port) `address` names now (a headless Service's name: one per pod)."""
    host, port = split_address(address)
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout_ms / 1000):
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: dict[tuple[str, int], None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        found[(str(sockaddr[0]), int(sockaddr[1]))] = None
    return list(found)
