"""One length-prefixed frame reader and one flow-controlled writer for every binary TCP link:
the remoting front (services/notifier/remoting/server.py), the writer's forward listener
(services/writer/forward_server.py) and the front's link to it (writer_link.py).

Every frame on those links is a 4-byte big-endian length, then that many bytes:

    offset  size  field
    0       4     length    u32, the bytes after this field (≤ frame_size_bytes_max)
    4       n     payload   the layout of its protocol (frame.py, forward_wire.py)

What a peer may not do to hold a connection (`FramedStream.read_frame`, and one
`FrameWatchdog` per listener or link that looks at every stream each `tick_ms`):

    idle:  between frames, no byte for `idle_timeout_ms` closes (a clean close there is
           the end of the stream, not an error)
    slow:  from a frame's first byte, the whole frame must arrive within
           `frame_read_timeout_ms`; the first frame's clock starts at accept.  A sender of
           a byte a second (slowloris) is closed after one deadline, never after an idle
           timeout per byte.  `frame_started_s` says since when the current frame is open,
           so a full listener can close the slowest such connection to admit a new one
    large: a length over `frame_size_bytes_max` closes (the next frame cannot be found)
    deaf:  before a frame is read, the write buffer must be at most
           `write_buffer_bytes_max`: a peer that does not read its answers stops being read

The deadlines are kept by the watchdog, not by a timer per read: a frame costs two
`readexactly` calls and no timer.  A stream's clock is its reader's (`TimedReader`): it notes
when bytes of a frame not yet read began to wait, so the watchdog tells a quiet peer from a
slow one without reading a byte itself.  A deadline is thus kept to within one tick.

Writing (`FramedStream.write`): each write first waits, in arrival order, until the write
buffer is at most `write_buffer_bytes_max`, so it holds at most that plus one frame (waiters
keep their own answers, and the reader stops making new ones).  The frames written in one
loop turn go out together: the first schedules one `writelines` for the end of the turn,
and the rest join it (one system call for the answers of every handler that finished in
that turn, where each used to cost its own).  Frames that wait for that turn count as
buffered.  A buffer not drained below
half of it within `write_drain_timeout_ms` aborts the connection: `abort()` drops the buffer
at once, where `close()` would keep it until the kernel gives up on the peer (minutes).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import SupportsIndex, TypeVar

LENGTH_SIZE_BYTES = 4
SETTLE_FRAMES_MAX = 16
"""Frames a pipelining peer may have read back to back before their handlers get a turn."""
TICK_MS_MAX = 1_000
"""The watchdog looks at least once a second, and four times per shortest deadline."""


def framed(payload: bytes) -> list[bytes]:
    """`payload` as a frame's parts: its length, then itself (not copied)."""
    return [len(payload).to_bytes(LENGTH_SIZE_BYTES, "big"), payload]


class TransportError(ConnectionError):
    """A peer that broke a bound of its link (late, too large, not reading, mid-frame close);
    the message names the bound.  The connection is unusable after it."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class FrameLimits:
    """The bounds of one link; each service takes them from its own settings section."""

    frame_size_bytes_max: int
    frame_read_timeout_ms: int
    write_buffer_bytes_max: int
    write_drain_timeout_ms: int
    idle_timeout_ms: int | None = None
    """None: wait for the next frame as long as the connection stays open (a link to a
    trusted peer that is quiet when nothing is sent)."""
    setting_prefix: str = ""
    """How the settings are spelled in messages (`forward_`, `remoting.`)."""

    def __post_init__(self) -> None:
        for name in ("frame_size_bytes_max", "frame_read_timeout_ms", "write_buffer_bytes_max",
                     "write_drain_timeout_ms"):
            assert getattr(self, name) > 0, name
        assert self.idle_timeout_ms is None or self.idle_timeout_ms > 0

    @property
    def tick_ms(self) -> int:
        shortest = min(self.frame_read_timeout_ms, self.idle_timeout_ms or TICK_MS_MAX * 4)
        return max(1, min(TICK_MS_MAX, shortest // 4))


class TimedReader(asyncio.StreamReader):
    """A StreamReader that counts what it received and what the frame reader took, and
    notes when the oldest byte not yet taken arrived (`waiting_since_s`, monotonic)."""

    def __init__(self) -> None:
        super().__init__()
        self.received_bytes = 0
        self.taken_bytes = 0
        self.waiting_since_s = time.monotonic()

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        assert isinstance(data, bytes | bytearray | memoryview), type(data)
        if data and self.received_bytes == self.taken_bytes:
            self.waiting_since_s = time.monotonic()
        self.received_bytes += len(data)
        super().feed_data(data)

    @property
    def has_unread_bytes(self) -> bool:
        return self.received_bytes > self.taken_bytes

    def took(self, size_bytes: int) -> None:
        """The frame reader consumed `size_bytes`; bytes already here start the next wait."""
        self.taken_bytes += size_bytes
        if self.received_bytes > self.taken_bytes:
            self.waiting_since_s = time.monotonic()


Connected = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def start_framed_server(connected: Connected, host: str, port: int, *,
                              ssl_context: ssl.SSLContext | None = None,
                              ssl_handshake_timeout_s: float | None = None) -> asyncio.Server:
    """`asyncio.start_server` whose connections read through a `TimedReader`."""
    loop = asyncio.get_running_loop()

    def protocol() -> asyncio.StreamReaderProtocol:
        return asyncio.StreamReaderProtocol(TimedReader(), connected)

    if ssl_context is None:
        return await loop.create_server(protocol, host, port)
    return await loop.create_server(protocol, host, port, ssl=ssl_context,
                                    ssl_handshake_timeout=ssl_handshake_timeout_s)


async def open_framed_connection(host: str, port: int, *,
                                 ssl_context: ssl.SSLContext | None = None,
                                 server_hostname: str | None = None
                                 ) -> tuple[TimedReader, asyncio.StreamWriter]:
    """`asyncio.open_connection` reading through a `TimedReader`; with `ssl_context`, over
    TLS, the peer's certificate checked against `server_hostname` (default: `host`)."""
    loop = asyncio.get_running_loop()
    reader = TimedReader()
    protocol = asyncio.StreamReaderProtocol(reader)
    if ssl_context is None:
        transport, _ = await loop.create_connection(lambda: protocol, host, port)
    else:
        transport, _ = await loop.create_connection(
            lambda: protocol, host, port, ssl=ssl_context,
            server_hostname=server_hostname or host)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


class FramedStream:
    """One connection, read a frame at a time and written with back-pressure.  Made by
    `FrameWatchdog.open_stream`, which keeps its read deadlines."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 limits: FrameLimits) -> None:
        assert isinstance(reader, TimedReader), "read through start_framed_server or " \
                                                "open_framed_connection"
        self._reader = reader
        self._writer = writer
        self._limits = limits
        self._writing = asyncio.Lock()
        self._accepted_s = time.monotonic()
        self._frames_read = 0
        self._frame_ended_s = self._accepted_s
        self._unsettled_frames = 0
        """Frames read back to back since the handlers last had a loop turn (`settle`)."""
        self._failure: str | None = None
        """Why the watchdog closed the stream: what the blocked read raises."""
        self._unsent: list[bytes] = []
        """Frames written this loop turn, sent together at its end (`_send_unsent`)."""
        self._unsent_bytes = 0
        writer.transport.set_write_buffer_limits(high=limits.write_buffer_bytes_max,
                                                 low=limits.write_buffer_bytes_max // 2)

    @property
    def frame_started_s(self) -> float | None:
        """Monotonic time the open frame began (accept, for the first); None between frames."""
        if self._frames_read == 0:
            return self._accepted_s
        return self._reader.waiting_since_s if self._reader.has_unread_bytes else None

    @property
    def buffered_bytes(self) -> int:
        return self._writer.transport.get_write_buffer_size() + self._unsent_bytes

    @property
    def writer(self) -> asyncio.StreamWriter:
        return self._writer

    async def read_frame(self, *, frame_size_bytes_max: int | None = None) -> bytes | None:
        """The next frame's payload (without its length), or None at a clean end of stream.
        `frame_size_bytes_max`: a smaller bound for this frame (a handshake's fixed size)."""
        if self.buffered_bytes > self._limits.write_buffer_bytes_max:
            await self.writable()
        reader = self._reader
        try:
            head = await reader.readexactly(LENGTH_SIZE_BYTES)
            length = int.from_bytes(head, "big")
            size_max = frame_size_bytes_max or self._limits.frame_size_bytes_max
            if length > size_max:
                raise TransportError(f"frame of {length} bytes is over {size_max} bytes "
                                     f"({self._limits.setting_prefix}frame_size_bytes_max)")
            payload = await reader.readexactly(length)
        except asyncio.IncompleteReadError as error:
            if self._failure is not None:
                raise TransportError(self._failure) from None
            if not error.partial and not reader.has_unread_bytes:
                return None
            raise TransportError("closed in the middle of a frame") from None
        except ConnectionError:
            if self._failure is not None:
                raise TransportError(self._failure) from None
            raise
        reader.took(LENGTH_SIZE_BYTES + length)
        self._frames_read += 1
        self._frame_ended_s = time.monotonic()
        return payload

    async def settle(self) -> None:
        """Call after starting a handler for a frame.  A pipelining peer (the next frame is
        here already) gets a loop turn once its answers wait in the write buffer, and at
        least every `SETTLE_FRAMES_MAX` frames: the handlers just started then write what
        they answer at once (or wait) before more frames are read, so the write-buffer check
        ahead of each read sees them, and a peer that reads nothing holds at most that many
        answers beyond `write_buffer_bytes_max`.  A turn per frame would cost ~35 µs of CPU
        each; a peer that waits for its answers costs no turn at all."""
        if not self._reader.has_unread_bytes:
            self._unsettled_frames = 0
            return
        self._unsettled_frames += 1
        # The transport's buffer only: frames written this turn go out at its end anyway,
        # and yielding for them would cost a turn, and a system call, per frame.
        if (self._writer.transport.get_write_buffer_size() > 0
                or self._unsettled_frames >= SETTLE_FRAMES_MAX):
            self._unsettled_frames = 0
            await asyncio.sleep(0)

    def overdue(self, now_s: float) -> str | None:
        """Which read bound the peer broke by `now_s` (None: none)."""
        limits = self._limits
        started_s = self.frame_started_s
        if started_s is not None:
            if now_s - started_s > limits.frame_read_timeout_ms / 1000:
                return (f"a frame was not finished within {limits.frame_read_timeout_ms} ms "
                        f"({limits.setting_prefix}frame_read_timeout_ms)")
        elif (limits.idle_timeout_ms is not None
              and now_s - self._frame_ended_s > limits.idle_timeout_ms / 1000):
            return (f"idle for {limits.idle_timeout_ms} ms "
                    f"({limits.setting_prefix}idle_timeout_ms)")
        return None

    def fail(self, reason: str) -> None:
        """Close for `reason`: a read waiting on the stream raises TransportError(reason)."""
        self._failure = reason
        self.abort()

    async def writable(self) -> None:
        """Return once the write buffer is at most `write_buffer_bytes_max`; abort the
        connection and raise TransportError if it does not drain in time."""
        if self.buffered_bytes <= self._limits.write_buffer_bytes_max:
            return
        self._send_unsent()
        try:
            async with asyncio.timeout(self._limits.write_drain_timeout_ms / 1000):
                await self._writer.drain()  # resumes at half the bound (the low-water mark)
        except TimeoutError:
            stuck = self.buffered_bytes
            self.abort()
            prefix = self._limits.setting_prefix
            raise TransportError(f"the peer did not read {stuck} buffered bytes within "
                                 f"{self._limits.write_drain_timeout_ms} ms "
                                 f"({prefix}write_drain_timeout_ms)") from None

    async def write(self, parts: Sequence[bytes]) -> None:
        """Write one frame's parts once the buffer has room (TransportError if it never does)."""
        if self._writing.locked() or self.buffered_bytes > self._limits.write_buffer_bytes_max:
            async with self._writing:
                await self.writable()
                self._write(parts)
        else:
            self._write(parts)

    def write_nowait(self, parts: Sequence[bytes]) -> bool:
        """Write now if the buffer has room and nobody waits; False (nothing written) if not."""
        if self._writing.locked() or self.buffered_bytes > self._limits.write_buffer_bytes_max:
            return False
        self._write(parts)
        return True

    def _write(self, parts: Sequence[bytes]) -> None:
        if self._writer.is_closing():
            raise TransportError("the connection is closed")
        if not self._unsent:
            asyncio.get_running_loop().call_soon(self._send_unsent)
        self._unsent += parts
        for part in parts:
            self._unsent_bytes += len(part)

    def _send_unsent(self) -> None:
        """Hand the frames written this turn to the transport in one call."""
        if not self._unsent:
            return
        unsent, self._unsent, self._unsent_bytes = self._unsent, [], 0
        if not self._writer.is_closing():
            self._writer.writelines(unsent)

    def abort(self) -> None:
        """Close at once, dropping whatever is buffered (the memory comes back now)."""
        self._unsent, self._unsent_bytes = [], 0
        self._writer.transport.abort()

    def close(self) -> None:
        """Close after the buffer is sent; a peer that stopped reading is aborted instead."""
        self._send_unsent()
        if self.buffered_bytes > 0:
            self.abort()
        else:
            self._writer.close()


class FrameWatchdog:
    """The read deadlines of every stream of one listener (or link): one task, awake each
    `limits.tick_ms` while a stream is open, closes each stream that broke one."""

    def __init__(self, limits: FrameLimits) -> None:
        self.limits = limits
        self._streams: set[FramedStream] = set()
        self._task: asyncio.Task[None] | None = None

    def open_stream(self, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> FramedStream:
        """A stream on a new connection, watched until `forget`."""
        stream = FramedStream(reader, writer, self.limits)
        self._streams.add(stream)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="frame-watchdog")
        return stream

    def forget(self, stream: FramedStream) -> None:
        self._streams.discard(stream)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        while self._streams:
            await asyncio.sleep(self.limits.tick_ms / 1000)
            now_s = time.monotonic()
            for stream in list(self._streams):
                reason = stream.overdue(now_s)
                if reason is not None:
                    self._streams.discard(stream)
                    stream.fail(reason)


Key = TypeVar("Key")


def oldest_open_frame(streams: Mapping[Key, FramedStream]) -> Key | None:
    """The key of the stream whose open frame (or handshake) began longest ago: the one a
    listener at its connection bound closes to admit another.  None if every stream is
    between frames (a slow sender is always mid-frame; an idle client never is)."""
    open_since = [(started_s, number, key)
                  for number, (key, stream) in enumerate(streams.items())
                  if (started_s := stream.frame_started_s) is not None]
    return min(open_since)[2] if open_since else None


def make_room(streams: dict[Key, FramedStream], *, connections_max: int, setting: str,
              logger: logging.Logger) -> bool:
    """Room for one more connection of a listener whose open connections are `streams`: at
    `connections_max`, abort the one whose open frame began longest ago (`oldest_open_frame`,
    a slow sender's) and forget it; False if every one is between frames (the new connection
    is refused).  `setting` names the bound in the log line."""
    if len(streams) < connections_max:
        return True
    victim = oldest_open_frame(streams)
    if victim is None:
        logger.warning("refused a connection: %d open, none in a frame (%s)", len(streams),
                       setting)
        return False
    logger.info("closed connection %s to admit another: its frame is the oldest open one "
                "(%s)", victim, setting)
    streams.pop(victim).abort()
    return True

