"""`WriterLink`: the front's one persistent connection to the writer's forward listener.

Sends are pipelined on it (services/common/forward_wire.py): each gets a request id and a
future, a reader task completes the futures as answers arrive, in any order.  The link
connects on first use and again after a failure; when it breaks, every waiting send fails
with SYSTEM_ERROR (in the producer's retry set: the client sends again).  At most
`writer_requests_in_flight_max` sends wait at once; one more answers SYSTEM_BUSY.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from mqstore.services.common.forward_wire import (
    ForwardAnswer,
    ForwardRequest,
    decode_answer,
    encode_request,
)
from mqstore.services.common.remoting_settings import RemotingSettings
from mqstore.services.common.wire import WireFormatError

from .codes import SYSTEM_BUSY, SYSTEM_ERROR, RemotingError

log = logging.getLogger("mqstore.remoting")

REQUEST_ID_MASK = 0xFFFFFFFF


class WriterLink:
    def __init__(self, settings: RemotingSettings) -> None:
        host, _, port = settings.writer_address.rpartition(":")
        self._address = (host, int(port))
        self._settings = settings
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[ForwardAnswer]] = {}
        self._next_id = 0
        self._connecting = asyncio.Lock()

    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    async def send(self, request: ForwardRequest) -> ForwardAnswer:
        """Forward one send (its `request_id` is replaced) and await the writer's answer."""
        if len(self._waiting) >= self._settings.writer_requests_in_flight_max:
            raise RemotingError(SYSTEM_BUSY, f"[OVERLOAD] {len(self._waiting)} sends wait for "
                                             f"the writer (writer_requests_in_flight_max)")
        writer = await self._connected()
        self._next_id = (self._next_id + 1) & REQUEST_ID_MASK
        request_id = self._next_id
        future: asyncio.Future[ForwardAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            writer.writelines(encode_request(request._replace(request_id=request_id)))
            return await asyncio.wait_for(asyncio.shield(future),
                                          self._settings.writer_timeout_ms / 1000)
        except TimeoutError:
            self._break(f"the writer did not answer within {self._settings.writer_timeout_ms}"
                        f" ms (writer_timeout_ms)")
            raise RemotingError(SYSTEM_ERROR, "the writer did not answer in time") from None
        finally:
            self._waiting.pop(request_id, None)

    async def _connected(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.open_connection(*self._address)
            except OSError as error:
                raise RemotingError(SYSTEM_ERROR, f"cannot reach the writer at "
                                                  f"{self._settings.writer_address}: "
                                                  f"{error.strerror or error}") from None
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read(reader, writer),
                                                    name="writer-link")
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reason = "the writer closed the connection"
        try:
            while True:
                length = int.from_bytes(await reader.readexactly(4), "big")
                answer = decode_answer(await reader.readexactly(length))
                future = self._waiting.get(answer.request_id)
                if future is not None and not future.done():
                    future.set_result(answer)
        except (asyncio.IncompleteReadError, ConnectionError) as error:
            reason = f"the connection to the writer broke: {error!r}"
        except WireFormatError as error:
            reason = f"the writer answered a malformed frame: {error}"
        if self._writer is writer:
            self._break(reason)

    def _break(self, reason: str) -> None:
        log.warning("writer link closed: %s", reason)
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(RemotingError(SYSTEM_ERROR, reason))
        self._waiting.clear()

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader_task
