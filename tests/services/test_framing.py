"""The frame reader and flow-controlled writer every binary link uses
(services/common/links/framing.py): bounds on what a peer may send, and what it may leave unread."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import Awaitable, Callable

import pytest

from mqstore.services.common.links.framing import (
    FramedStream,
    FrameLimits,
    FrameWatchdog,
    TransportError,
    start_framed_server,
)
from tests.services.serving import run

FRAME_BYTES = 64 * 1024
BUFFER_BYTES_MAX = 256 * 1024
LIMITS = FrameLimits(frame_size_bytes_max=FRAME_BYTES, frame_read_timeout_ms=300,
                     write_buffer_bytes_max=BUFFER_BYTES_MAX, write_drain_timeout_ms=300,
                     idle_timeout_ms=5_000)

Served = Callable[[FramedStream], Awaitable[object]]


async def pair(serve: Served) -> tuple[asyncio.Future[object], asyncio.StreamReader,
                                       asyncio.StreamWriter]:
    """A listener running `serve` on its one connection, and a client connected to it."""
    outcome: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stream = watchdog.open_stream(reader, writer)
        try:
            outcome.set_result(await serve(stream))
        except Exception as error:
            outcome.set_result(error)
        finally:
            watchdog.forget(stream)

    watchdog = FrameWatchdog(LIMITS)
    server = await start_framed_server(handle, "127.0.0.1", 0)
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    raw.setblocking(False)
    await asyncio.get_running_loop().sock_connect(raw, server.sockets[0].getsockname())
    reader, writer = await asyncio.open_connection(sock=raw)
    outcome.add_done_callback(lambda _: server.close())
    return outcome, reader, writer


def test_a_peer_that_does_not_read_holds_one_bound_then_is_dropped() -> None:
    async def serve(stream: FramedStream) -> object:
        buffered_max = 0
        try:
            for _ in range(200):  # 12.5 MiB if nothing held it back
                await stream.write([b"x" * FRAME_BYTES])
                buffered_max = max(buffered_max, stream.buffered_bytes)
        except TransportError as error:
            return buffered_max, str(error), stream.buffered_bytes
        return "all written"

    async def scenario() -> object:
        outcome, _, writer = await pair(serve)
        result = await asyncio.wait_for(outcome, 10)
        writer.close()
        return result

    result = run(scenario)
    assert isinstance(result, tuple), result
    buffered_max, reason, buffered_after = result
    assert buffered_max <= BUFFER_BYTES_MAX + FRAME_BYTES
    assert "write_drain_timeout_ms" in reason
    assert buffered_after == 0  # aborted: the buffer is dropped, not kept for the kernel


@pytest.mark.parametrize(("sent", "expected"), [
    (b"", None),
    (b"\0\0\0\x03abc", b"abc"),
    ((FRAME_BYTES + 1).to_bytes(4, "big"), "frame_size_bytes_max"),
    (b"\0\0\0\x09abc", "middle of a frame"),
    (b"\0\0", "frame_read_timeout_ms"),
])
def test_frames_are_read_whole_small_and_in_time(sent: bytes,
                                                 expected: bytes | str | None) -> None:
    async def serve(stream: FramedStream) -> object:
        return await stream.read_frame()

    async def scenario() -> object:
        outcome, _, writer = await pair(serve)
        writer.write(sent)
        if expected != "frame_read_timeout_ms":
            writer.write_eof()
        result = await asyncio.wait_for(outcome, 10)
        writer.close()
        return result

    result = run(scenario)
    if isinstance(expected, str):
        assert isinstance(result, TransportError)
        assert expected in str(result)
    else:
        assert result == expected


def test_a_quiet_peer_is_closed_after_the_idle_timeout_and_not_before() -> None:
    limits = dataclasses.replace(LIMITS, idle_timeout_ms=400)

    async def scenario() -> object:
        watchdog = FrameWatchdog(limits)
        closed: asyncio.Future[tuple[float, object]] = asyncio.get_running_loop().create_future()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            stream = watchdog.open_stream(reader, writer)
            first = await stream.read_frame()
            started_s = time.monotonic()
            try:
                await stream.read_frame()
            except TransportError as error:
                closed.set_result((time.monotonic() - started_s, (first, str(error))))

        server = await start_framed_server(handle, "127.0.0.1", 0)
        _, writer = await asyncio.open_connection(*server.sockets[0].getsockname())
        writer.write(b"\0\0\0\x02hi")
        quiet_s, outcome = await asyncio.wait_for(closed, 10)
        writer.close()
        server.close()
        await watchdog.stop()
        return quiet_s, outcome

    quiet_s, (first, reason) = run(scenario)
    assert first == b"hi"
    assert "idle_timeout_ms" in reason
    assert quiet_s >= 0.3  # within one tick of the bound, never before it
