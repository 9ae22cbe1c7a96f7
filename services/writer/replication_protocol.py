"""The replication wire format: RocketMQ's HA protocol (`HAConnection`), big-endian, over TCP.

Follower → master, a stream of reports, each 8 bytes:

    offset  size  field
    0       8     position   int64: where the follower's log ends (the next byte it needs)

The first report says where to stream from (0 from an empty follower: the master then
streams its whole retained log, from its first segment).  Later ones confirm what the
follower appended; the master reads whatever arrived and keeps the last whole report.

Master → follower, frames:

    offset  size  field
    0       8     position   int64: where `data` goes in the log
    8       4     size       int32: bytes of data; 0 = heartbeat (position: the master's next)
    12      size  data       whole records, as stored (storage/format/record_chunks.py)

A frame never crosses a segment boundary; its size is at most the larger of the master's
`batch_bytes_max` and one record (or a segment's BLANK tail), so never over a segment.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

REPORT = struct.Struct(">q")
FRAME_HEAD = struct.Struct(">qi")
assert REPORT.size == 8
assert FRAME_HEAD.size == 12


class ProtocolError(ValueError):
    """Bytes that do not follow the format (the connection is closed; the follower
    reconnects)."""


def encode_report(position: int) -> bytes:
    assert position >= 0
    return REPORT.pack(position)


def encode_frame_head(position: int, size_bytes: int) -> bytes:
    assert position >= 0
    assert size_bytes >= 0
    return FRAME_HEAD.pack(position, size_bytes)


class ReportReader:
    """Reassembles reports from whatever the socket delivered."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> int | None:
        """The last whole report in `pending + data`, or None if none completed."""
        data = self._pending + data if self._pending else data
        whole = len(data) - len(data) % REPORT.size
        self._pending = data[whole:]
        if not whole:
            return None
        (position,) = REPORT.unpack_from(data, whole - REPORT.size)
        if position < 0:
            raise ProtocolError(f"a negative position in a report: {position}")
        return int(position)


FrameHandler = Callable[[int, memoryview], None]
"""Called with (position, data) per frame; `data` is valid only during the call (empty for a
heartbeat)."""


class FrameReader:
    """Reassembles frames; refuses one larger than `frame_bytes_max` before buffering it."""

    def __init__(self, *, frame_bytes_max: int) -> None:
        assert frame_bytes_max > 0
        self._frame_bytes_max = frame_bytes_max
        self._buffer = bytearray()

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes, handle: FrameHandler) -> int:
        """Hand every whole frame to `handle`, in order; return how many.  A frame whose
        handler raises is consumed: the connection is closed after such an error anyway."""
        buffer = self._buffer
        buffer += data
        consumed = frames = 0
        head_size = FRAME_HEAD.size
        try:
            with memoryview(buffer) as view:
                while len(buffer) - consumed >= head_size:
                    position, size = FRAME_HEAD.unpack_from(buffer, consumed)
                    if position < 0 or not 0 <= size <= self._frame_bytes_max:
                        raise ProtocolError(f"a frame of {size} bytes at position {position} "
                                            f"(at most {self._frame_bytes_max})")
                    end = consumed + head_size + size
                    if end > len(buffer):
                        break
                    with view[consumed + head_size:end] as frame:
                        consumed = end
                        frames += 1
                        handle(position, frame)
        finally:
            del buffer[:consumed]
        return frames
