"""The `checkpoint` file: how far each structure was safely synced.

One 4096-byte page, big-endian, RocketMQ `StoreCheckpoint` layout plus a checksum trailer:

    @0     physic_msg_timestamp_ms    int64  store time of the newest record synced in the log
    @8     logics_msg_timestamp_ms    int64  ... in the consume queues
    @16    index_msg_timestamp_ms     int64  ... in the index files
    @24    master_flushed_offset      int64  (RocketMQ 5) commit log flushed position
    @32    confirm_physical_offset    int64  (RocketMQ 5) position confirmed by replication
    @40    zeros
    @4088  b"MQCK"                    4 B    trailer marker (RocketMQ leaves these bytes zero)
    @4092  crc32 of bytes [0, 40)     uint32
    = 4096 bytes

RocketMQ ignores the trailer, so it reads our file; a file without the marker is RocketMQ's
own and is trusted as RocketMQ trusts it.  A file with the marker and a bad CRC (a torn write)
is reported as corrupt, and recovery then assumes nothing was safely synced.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import struct
import threading
import zlib
from pathlib import Path

CHECKPOINT_FILE_SIZE_BYTES = 4096
_FIELDS = struct.Struct(">qqqqq")
_TRAILER = struct.Struct(">4sI")
_MARKER = b"MQCK"
_TRAILER_POSITION = CHECKPOINT_FILE_SIZE_BYTES - _TRAILER.size
assert _FIELDS.size == 40
assert _TRAILER_POSITION == 4088

SAFETY_MARGIN_MS = 3000
"""RocketMQ subtracts 3 s from the checkpoint's timestamps before trusting them."""


class CheckpointState(enum.Enum):
    VALID = "valid"
    """Written by mqstore, CRC matches."""
    FOREIGN = "foreign"
    """No trailer: written by RocketMQ itself (no checksum to verify)."""
    MISSING = "missing"
    CORRUPT = "corrupt"


@dataclasses.dataclass
class CheckpointValues:
    physic_msg_timestamp_ms: int = 0
    logics_msg_timestamp_ms: int = 0
    index_msg_timestamp_ms: int = 0
    master_flushed_offset: int = 0
    confirm_physical_offset: int = 0

    @property
    def min_timestamp_ms(self) -> int:
        """RocketMQ `getMinTimestamp`: the older of log and queues, minus the margin."""
        return max(0, min(self.physic_msg_timestamp_ms, self.logics_msg_timestamp_ms)
                   - SAFETY_MARGIN_MS)


class Checkpoint:
    """Reads the file at open; `write()` persists the values with pwrite + fdatasync."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.values, self.state = read_checkpoint(path)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._last_written: bytes | None = None
        self._lock = threading.Lock()
        """The log's flush service and the queues' flush service both write it."""

    def write(self) -> None:
        with self._lock:
            page = encode_checkpoint(self.values)
            if page == self._last_written:
                return
            written = os.pwrite(self._fd, page, 0)
            assert written == CHECKPOINT_FILE_SIZE_BYTES
            os.fdatasync(self._fd)
            self._last_written = page

    def close(self) -> None:
        os.close(self._fd)


def encode_checkpoint(values: CheckpointValues) -> bytes:
    page = bytearray(CHECKPOINT_FILE_SIZE_BYTES)
    _FIELDS.pack_into(page, 0, values.physic_msg_timestamp_ms, values.logics_msg_timestamp_ms,
                      values.index_msg_timestamp_ms, values.master_flushed_offset,
                      values.confirm_physical_offset)
    _TRAILER.pack_into(page, _TRAILER_POSITION, _MARKER, zlib.crc32(page[:_FIELDS.size]))
    return bytes(page)


def read_checkpoint(path: Path) -> tuple[CheckpointValues, CheckpointState]:
    try:
        page = path.read_bytes()
    except FileNotFoundError:
        return CheckpointValues(), CheckpointState.MISSING
    if len(page) < _FIELDS.size:
        return CheckpointValues(), CheckpointState.CORRUPT
    values = CheckpointValues(*_FIELDS.unpack_from(page, 0))
    if len(page) < CHECKPOINT_FILE_SIZE_BYTES:
        return values, CheckpointState.CORRUPT
    marker, crc = _TRAILER.unpack_from(page, _TRAILER_POSITION)
    if marker != _MARKER:
        if marker != bytes(4) or crc != 0:
            return CheckpointValues(), CheckpointState.CORRUPT
        return values, CheckpointState.FOREIGN
    if crc != zlib.crc32(page[:_FIELDS.size]):
        return CheckpointValues(), CheckpointState.CORRUPT
    return values, CheckpointState.VALID
