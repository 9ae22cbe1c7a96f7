"""`WriterLink`: the front's one persistent connection to the writer's forward listener.

Sends are pipelined on it (services/common/links/forward_wire.py): each gets a request id and a
future, a reader task completes the futures as answers arrive, in any order.  The link
connects on first use and again after a failure, and on each connect proves it holds the
secret the writer published in the data directory, and checks the writer's proof back
(services/common/links/forward_secret.py), before any send.  When it breaks, every waiting send
fails with SYSTEM_ERROR (in the producer's retry set: the client sends again); so does every
waiting send once the oldest has waited `writer_timeout_ms`.  At most
`writer_requests_in_flight_max` sends wait at once; one more answers SYSTEM_BUSY.

Frames are read and written by services/common/links/framing.py: an answer must arrive whole
within `frame_read_timeout_ms` of its first byte, and a send waits to be written while more
than `write_buffer_bytes_max` of sends wait for the writer to read them (a writer that stops
reading holds the link's memory to that bound; its sends time out after
`writer_timeout_ms`, which also bounds the handshake).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path

from mqstore.services.common.http.batch_wire import WireFormatError
from mqstore.services.common.links.forward_secret import prove_front, read_secret
from mqstore.services.common.links.forward_wire import (
    ForwardAnswer,
    ForwardRequest,
    decode_answer,
    encode_request,
)
from mqstore.services.common.links.framing import (
    FramedStream,
    FrameLimits,
    FrameWatchdog,
    TransportError,
    open_framed_connection,
)
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting.codes import SYSTEM_BUSY, SYSTEM_ERROR, RemotingError

log = logging.getLogger("mqstore.remoting")

REQUEST_ID_MASK = 0xFFFFFFFF


class WriterLink:
    def __init__(self, settings: RemotingSettings, *, secret_path: Path) -> None:
        """`secret_path`: the forward secret the writer publishes (`<data_dir>/forward-secret`,
        services/common/links/forward_secret.py), read again at every connect."""
        host, _, port = settings.writer_address.rpartition(":")
        self._address = (host, int(port))
        self._settings = settings
        self._secret_path = secret_path
        self._watchdog = FrameWatchdog(FrameLimits(
            frame_size_bytes_max=settings.frame_size_bytes_max,
            frame_read_timeout_ms=settings.frame_read_timeout_ms,
            write_buffer_bytes_max=settings.write_buffer_bytes_max,
            write_drain_timeout_ms=settings.writer_timeout_ms, setting_prefix="remoting."))
        self._stream: FramedStream | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._expiry_task: asyncio.Task[None] | None = None
        self._waiting: dict[int, tuple[asyncio.Future[ForwardAnswer], float]] = {}
        """Sends awaiting their answer by request id, oldest first, with when each was sent
        (monotonic seconds)."""
        self._next_id = 0
        self._connecting = asyncio.Lock()

    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    async def send(self, request: ForwardRequest) -> ForwardAnswer:
        """Forward one send (its `request_id` is replaced) and await the writer's answer.

        No timer per send: one task per link (`_expire`) breaks the link when the oldest
        send has waited `writer_timeout_ms`, which fails every waiting send (the writer is
        stuck or gone for all of them alike)."""
        self._check_room()
        stream = self._stream
        if stream is None or stream.writer.is_closing():
            stream = await self._connect_in_time()
        self._next_id = request_id = (self._next_id + 1) & REQUEST_ID_MASK
        future: asyncio.Future[ForwardAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (future, time.monotonic())
        try:
            await stream.write(encode_request(request._replace(request_id=request_id)))
            return await future
        except TransportError as error:  # the writer did not read its sends in time
            self._break(f"the connection to the writer broke: {error}")
            raise RemotingError(SYSTEM_ERROR, f"the writer link broke: {error}") from None
        finally:
            self._waiting.pop(request_id, None)

    def send_nowait(self, request: ForwardRequest) -> asyncio.Future[ForwardAnswer] | None:
        """Forward one send now and return the future of the writer's answer, without a task
        or a coroutine; None (nothing sent) if the link is not connected or its buffer is
        full: `send` then waits for both."""
        self._check_room()
        stream = self._stream
        if stream is None or stream.writer.is_closing():
            return None
        request_id = (self._next_id + 1) & REQUEST_ID_MASK
        if not stream.write_nowait(encode_request(request._replace(request_id=request_id))):
            return None
        self._next_id = request_id
        future: asyncio.Future[ForwardAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (future, time.monotonic())
        return future

    def _check_room(self) -> None:
        if len(self._waiting) >= self._settings.writer_requests_in_flight_max:
            raise RemotingError(SYSTEM_BUSY, f"[OVERLOAD] {len(self._waiting)} sends wait for "
                                             f"the writer (writer_requests_in_flight_max)")

    async def _connect_in_time(self) -> FramedStream:
        timeout_ms = self._settings.writer_timeout_ms
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await self._connected()
        except TimeoutError:
            self._break(f"the writer did not answer within {timeout_ms} ms (writer_timeout_ms)")
            raise RemotingError(SYSTEM_ERROR, "the writer did not answer in time") from None
        except ConnectionError as error:
            self._break(f"the connection to the writer broke: {error}")
            raise RemotingError(SYSTEM_ERROR, f"the writer link broke: {error}") from None

    async def _expire(self, stream: FramedStream) -> None:
        """While `stream` is the link: each tick, break it if its oldest send is overdue."""
        timeout_s = self._settings.writer_timeout_ms / 1000
        tick_s = min(1.0, timeout_s / 4)
        while self._stream is stream:
            await asyncio.sleep(tick_s)
            oldest = next(iter(self._waiting.values()), None)
            if oldest is not None and time.monotonic() - oldest[1] > timeout_s:
                self._break(f"the writer did not answer a send within "
                            f"{self._settings.writer_timeout_ms} ms (writer_timeout_ms)")

    async def _connected(self) -> FramedStream:
        async with self._connecting:
            if self._stream is not None and not self._stream.writer.is_closing():
                return self._stream
            try:
                secret = read_secret(self._secret_path)
                reader, writer = await open_framed_connection(*self._address)
            except OSError as error:
                raise RemotingError(SYSTEM_ERROR, f"cannot reach the writer at "
                                                  f"{self._settings.writer_address}: "
                                                  f"{error.strerror or error}") from None
            stream = self._watchdog.open_stream(reader, writer)
            try:
                await prove_front(stream, secret)
            except (ConnectionError, asyncio.CancelledError) as error:
                self._watchdog.forget(stream)
                stream.abort()
                if isinstance(error, asyncio.CancelledError):
                    raise
                log.warning("writer link refused: %s", error)
                raise RemotingError(SYSTEM_ERROR, f"the writer at "
                                                  f"{self._settings.writer_address} refused "
                                                  f"the link: {error}") from None
            self._stream = stream
            self._reader_task = asyncio.create_task(self._read(stream), name="writer-link")
            self._expiry_task = asyncio.create_task(self._expire(stream),
                                                    name="writer-link-expiry")
            return stream

    async def _read(self, stream: FramedStream) -> None:
        reason = "the writer closed the connection"
        try:
            while (frame := await stream.read_frame()) is not None:
                answer = decode_answer(frame)
                waiting = self._waiting.pop(answer.request_id, None)
                if waiting is not None and not waiting[0].done():
                    waiting[0].set_result(answer)
        except ConnectionError as error:
            reason = f"the connection to the writer broke: {error!r}"
        except WireFormatError as error:
            reason = f"the writer answered a malformed frame: {error}"
        if self._stream is stream:
            self._break(reason)

    def _break(self, reason: str) -> None:
        log.warning("writer link closed: %s", reason)
        if self._stream is not None:
            self._watchdog.forget(self._stream)
            self._stream.abort()
        self._stream = None
        for future, _ in self._waiting.values():
            if not future.done():
                future.set_exception(RemotingError(SYSTEM_ERROR, reason))
        self._waiting.clear()

    async def close(self) -> None:
        if self._stream is not None:
            self._watchdog.forget(self._stream)
            self._stream.close()
            self._stream = None
        await self._watchdog.stop()
        for task in (self._reader_task, self._expiry_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
