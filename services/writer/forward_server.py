"""`ForwardServer`: the writer's listener for sends the remoting front forwards.

The front (services/notifier/remoting/writer_link.py) keeps one connection open and pipelines
requests on it (layout: services/common/links/forward_wire.py).  A connection is served only
after it proves the secret this listener publishes in the data directory at start
(services/common/links/forward_secret.py): the port takes stores of any topic, queue, born host
and time, so it is the front's alone.  Frames are read and answers written by
services/common/links/framing.py (a frame's deadline, the write-buffer bound; at
`forward_connections_max` the connection with the oldest open frame or handshake is
closed).  Each request is checked, admitted and stored by the writer's one produce core, as
the HTTP views' requests are (services/writer/produce.py: the same message and topic rules,
and sync flush and sync masters await their acknowledgement without blocking the loop), and
its answer is written when the put completes, so answers may overtake one another.  Where
a put never waits (async flush, no sync master) the read loop stores and answers each
request itself: no task per request (a task cost ~5% of the writer's time on single sends).

What the store needs is all that is decoded: the header fields the front passed, and for a
batch the entry boundaries (RocketMQ's batch layout, below).  Bodies and properties are
stored byte for byte.  A malformed frame closes the connection (the front reconnects); an
illegal message answers MESSAGE_ILLEGAL with the reason, a refused topic NO_PERMISSION or
TOPIC_NOT_EXIST.

A RocketMQ batch body entry (`MessageDecoder.encodeMessages`), back to back:

    0   4  total size (the whole entry)   4   4  magic (0)   8   4  body CRC (0)
    12  4  flag                           16  4  body length, then the body
    then   2  properties length (int16), then the properties
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from mqstore.services.common.http.batch_wire import WireFormatError
from mqstore.services.common.links.forward_secret import (
    ForwardAuthError,
    check_front,
    publish_secret,
    withdraw_secret,
)
from mqstore.services.common.links.forward_wire import (
    KIND_BATCH,
    KIND_ROUTED,
    ForwardAnswer,
    ForwardRequest,
    decode_request,
    encode_answer,
)
from mqstore.services.common.links.framing import (
    FramedStream,
    FrameLimits,
    FrameWatchdog,
    make_room,
    start_framed_server,
)
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.common.topics.rules import RETRY_PREFIX
from mqstore.services.writer.produce import ProduceCore, ProduceRefusal
from mqstore.storage import Message, PutResult, PutStatus
from mqstore.storage.format.batch_body import BatchBodyError, split_batch

log = logging.getLogger("mqstore.writer")

PROPERTY_SEPARATOR = b"\x02"
RETRY_TOPIC_PROPERTY = b"RETRY_TOPIC\x01"


class ForwardServer:
    def __init__(self, core: ProduceCore, settings: WriterSettings) -> None:
        self._core = core
        self._settings = settings
        self._limits = FrameLimits(
            frame_size_bytes_max=settings.forward_frame_size_bytes_max,
            frame_read_timeout_ms=settings.forward_frame_read_timeout_ms,
            write_buffer_bytes_max=settings.forward_write_buffer_bytes_max,
            write_drain_timeout_ms=settings.forward_write_drain_timeout_ms,
            setting_prefix="writer.forward_")
        self._watchdog = FrameWatchdog(self._limits)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._streams: dict[asyncio.Task[None], FramedStream] = {}
        self._secret = b""
        self._data_dir: Path | None = None

    async def start(self, *, data_dir: Path) -> int:
        """Publish a new forward secret in `data_dir`, then listen; returns the bound port."""
        self._data_dir = data_dir
        self._secret = publish_secret(data_dir)
        self._server = await start_framed_server(self._serve, self._settings.forward_host,
                                                 self._settings.forward_port)
        port = int(self._server.sockets[0].getsockname()[1])
        log.info("forward listening", extra={"port": port})
        return port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await self._watchdog.stop()
        if self._data_dir is not None:
            withdraw_secret(self._data_dir, self._secret)

    def _admit(self) -> bool:
        """At `forward_connections_max`, close the connection whose handshake or frame has
        been open longest (never the front's, which sends whole frames)."""
        return make_room(self._streams,
                         connections_max=self._settings.forward_connections_max,
                         setting="forward_connections_max", logger=log)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if not self._admit():
            writer.close()
            return
        stream = self._watchdog.open_stream(reader, writer)
        self._tasks.add(task)
        self._streams[task] = stream
        pending: set[asyncio.Task[None]] = set()
        try:
            await check_front(stream, self._secret)
            while (frame := await stream.read_frame()) is not None:
                request = decode_request(frame)
                if self._core.puts_now:  # nothing to wait for: answered here, no task
                    checked = self._checked(request)
                    answer = checked if isinstance(checked, ForwardAnswer) else \
                        self._answer_of(request, self._core.put_now(checked))
                    if stream.write_nowait([encode_answer(answer)]):
                        await stream.settle()
                        continue
                    put = asyncio.create_task(self._write(answer, stream))
                else:
                    put = asyncio.create_task(self._answer(request, stream))
                pending.add(put)
                put.add_done_callback(pending.discard)
                await stream.settle()
        except ForwardAuthError as error:
            log.warning("forward connection refused: %s", error)
        except (WireFormatError, ConnectionError) as error:
            log.warning("forward connection closed: %s", error)
        finally:
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
            self._streams.pop(task, None)
            self._watchdog.forget(stream)
            stream.close()
            self._tasks.discard(task)

    async def _answer(self, request: ForwardRequest, stream: FramedStream) -> None:
        await self._write(await self.store(request), stream)

    @staticmethod
    async def _write(answer: ForwardAnswer, stream: FramedStream) -> None:
        if not stream.writer.is_closing():
            with contextlib.suppress(ConnectionError):  # the read loop closes and logs it
                await stream.write([encode_answer(answer)])

    async def store(self, request: ForwardRequest) -> ForwardAnswer:
        checked = self._checked(request)
        if isinstance(checked, ForwardAnswer):
            return checked
        return self._answer_of(request, await self._core.put(checked))

    def _checked(self, request: ForwardRequest) -> ForwardAnswer | list[Message]:
        """The request's messages, checked and admitted; or the answer that refuses it."""
        core = self._core
        try:
            core.refuse_on_follower()
            messages = self._messages(request)
            batch = request.kind == KIND_BATCH
            core.check(messages, where="message", batch=batch)
            routed = request.kind == KIND_ROUTED
            core.admit((request.topic,), send_back=routed or _is_send_back(request),
                       routed=routed)
            messages = core.delayed(messages, batch=batch)
        except WireFormatError as error:
            return ForwardAnswer(request.request_id, PutStatus.MESSAGE_ILLEGAL.value, [],
                                 str(error))
        except ProduceRefusal as refused:
            return ForwardAnswer(request.request_id, refused.status, [], refused.reason)
        return messages

    @staticmethod
    def _answer_of(request: ForwardRequest, results: list[PutResult]) -> ForwardAnswer:
        """The answer to the results of a put."""
        status = results[0].status
        if not results[0].ok and results[0].physical_offset < 0:
            return ForwardAnswer(request.request_id, status.value, [], results[0].reason)
        return ForwardAnswer(request.request_id, status.value,
                             [(result.queue_offset, result.physical_offset,
                               result.store_timestamp_ms) for result in results],
                             results[0].reason)

    def _messages(self, request: ForwardRequest) -> list[Message]:
        if request.kind != KIND_BATCH:
            return [self._message(request, request.body, request.flag, request.properties)]
        try:
            entries = split_batch(request.body, request.properties,
                                  self._settings.batch_messages_max)
        except BatchBodyError as error:
            raise WireFormatError(str(error)) from None
        message = self._message
        return [message(request, body, flag, properties) for body, flag, properties in entries]

    @staticmethod
    def _message(request: ForwardRequest, body: bytes, flag: int,
                 properties: bytes) -> Message:
        return Message(request.topic, request.queue_id, body, flag=flag,
                       born_host=request.born_host or None,
                       born_timestamp_ms=request.born_timestamp_ms, sysflag=request.sysflag,
                       reconsume_times=request.reconsume_times,
                       properties_encoded=properties or None)


def _is_send_back(request: ForwardRequest) -> bool:
    """A consumer's send-back of a failed message to `%RETRY%<group>`: what a RocketMQ
    client sends when the broker does not serve CONSUMER_SEND_MSG_BACK (it names the
    message's original topic in RETRY_TOPIC)."""
    return request.topic.startswith(RETRY_PREFIX) and (
        request.properties.startswith(RETRY_TOPIC_PROPERTY)
        or PROPERTY_SEPARATOR + RETRY_TOPIC_PROPERTY in request.properties)
