"""One length-prefixed frame reader and one flow-controlled writer for every binary TCP link:
the remoting front (services/notifier/remoting/server.py), the writer's forward listener
(services/writer/forward_server.py) and the front's link to it (writer_link.py).

Every frame on those links is a 4-byte big-endian length, then that many bytes:

    offset  size  field
    0       4     length    u32, the bytes after this field (≤ frame_size_bytes_max)
    4       n     payload   the layout of its protocol (frame.py, forward_wire.py)

Reading (`FramedStream.read_frame`), what a peer may not do to hold a connection:

    idle:  between frames, wait up to `idle_timeout_ms` for a frame's first byte (a clean
           close there is the end of the stream, not an error)
    slow:  from a frame's first byte, the whole frame must arrive within
           `frame_read_timeout_ms`; the first frame's clock starts at accept.  A sender of
           a byte a second (slowloris) is closed after one deadline, never after an idle
           timeout per byte.  `frame_started_s` says since when the current frame is open,
           so a full listener can close the slowest such connection to admit a new one
    large: a length over `frame_size_bytes_max` closes (the next frame cannot be found)
    deaf:  before a frame is read, the write buffer must be at most
           `write_buffer_bytes_max`: a peer that does not read its answers stops being read

Writing (`FramedStream.write`): each write first waits, in arrival order, until the write
buffer is at most `write_buffer_bytes_max`, so it holds at most that plus one frame (waiters
keep their own answers, and the reader stops making new ones).  A buffer not drained below
half of it within `write_drain_timeout_ms` aborts the connection: `abort()` drops the buffer
at once, where `close()` would keep it until the kernel gives up on the peer (minutes).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TypeVar

LENGTH_SIZE_BYTES = 4


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


class FramedStream:
    """One connection, read a frame at a time and written with back-pressure."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 limits: FrameLimits) -> None:
        self._reader = reader
        self._writer = writer
        self._limits = limits
        self._writing = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        writer.transport.set_write_buffer_limits(high=limits.write_buffer_bytes_max,
                                                 low=limits.write_buffer_bytes_max // 2)
        self.frame_started_s: float | None = self._loop.time()
        """Loop time the open frame began (accept, for the first); None between frames."""

    @property
    def buffered_bytes(self) -> int:
        return self._writer.transport.get_write_buffer_size()

    @property
    def writer(self) -> asyncio.StreamWriter:
        return self._writer

    async def read_frame(self, *, frame_size_bytes_max: int | None = None) -> bytes | None:
        """The next frame's payload (without its length), or None at a clean end of stream.
        `frame_size_bytes_max`: a smaller bound for this frame (a handshake's fixed size)."""
        await self.writable()
        first = b""
        if self.frame_started_s is None:
            first = await self._first_byte()
            if not first:
                return None
            self.frame_started_s = self._loop.time()
        size_max = frame_size_bytes_max or self._limits.frame_size_bytes_max
        payload = await self._rest_of_frame(first, size_max)
        self.frame_started_s = None
        return payload

    async def _first_byte(self) -> bytes:
        """Between frames: the next frame's first byte, b"" at a clean end of stream."""
        limits = self._limits
        idle_s = None if limits.idle_timeout_ms is None else limits.idle_timeout_ms / 1000
        try:
            async with asyncio.timeout(idle_s):
                return await self._reader.read(1)
        except TimeoutError:
            raise TransportError(f"idle for {limits.idle_timeout_ms} ms "
                                 f"({limits.setting_prefix}idle_timeout_ms)") from None

    async def _rest_of_frame(self, first: bytes, size_max: int) -> bytes | None:
        """The frame whose first byte is `first` (b"": the first frame, its clock running
        since accept; None if the peer closes before sending any byte of it)."""
        limits = self._limits
        assert self.frame_started_s is not None
        try:
            async with asyncio.timeout_at(self.frame_started_s
                                          + limits.frame_read_timeout_ms / 1000):
                if not first:
                    first = await self._reader.read(1)
                    if not first:
                        return None
                head = first + await self._reader.readexactly(LENGTH_SIZE_BYTES - 1)
                length = int.from_bytes(head, "big")
                if length > size_max:
                    raise TransportError(f"frame of {length} bytes is over {size_max} bytes "
                                         f"({limits.setting_prefix}frame_size_bytes_max)")
                return await self._reader.readexactly(length)
        except TimeoutError:
            raise TransportError(f"a frame was not finished within {limits.frame_read_timeout_ms}"
                                 f" ms ({limits.setting_prefix}frame_read_timeout_ms)") from None
        except asyncio.IncompleteReadError:
            raise TransportError("closed in the middle of a frame") from None

    async def writable(self) -> None:
        """Return once the write buffer is at most `write_buffer_bytes_max`; abort the
        connection and raise TransportError if it does not drain in time."""
        if self.buffered_bytes <= self._limits.write_buffer_bytes_max:
            return
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
        self._writer.writelines(parts)

    def abort(self) -> None:
        """Close at once, dropping whatever is buffered (the memory comes back now)."""
        self._writer.transport.abort()

    def close(self) -> None:
        """Close after the buffer is sent; a peer that stopped reading is aborted instead."""
        if self.buffered_bytes > 0:
            self.abort()
        else:
            self._writer.close()


Key = TypeVar("Key")


def oldest_open_frame(streams: Mapping[Key, FramedStream]) -> Key | None:
    """The key of the stream whose open frame (or handshake) began longest ago: the one a
    listener at its connection bound closes to admit another.  None if every stream is
    between frames (a slow sender is always mid-frame; an idle client never is)."""
    open_since = [(stream.frame_started_s, number, key)
                  for number, (key, stream) in enumerate(streams.items())
                  if stream.frame_started_s is not None]
    return min(open_since)[2] if open_since else None
