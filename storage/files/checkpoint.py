"""The `checkpoint` file: how far each structure was safely synced.

One 4096-byte page, big-endian, RocketMQ `StoreCheckpoint` layout plus mqstore's trailer:

    @0     physic_msg_timestamp_ms    int64  store time of the newest record synced in the log
    @8     logics_msg_timestamp_ms    int64  ... in the consume queues
    @16    index_msg_timestamp_ms     int64  ... in the index files
    @24    master_flushed_offset      int64  (RocketMQ 5) commit log flushed position
    @32    confirm_physical_offset    int64  (RocketMQ 5) position confirmed by replication
    @40    reserved                   int64  kept as read (RocketMQ 5 may write here)
    @48    zeros
    @4032  copy of bytes [0, 48)      48 B   what mqstore wrote last
    @4080  zeros                      8 B
    @4088  b"MQCK"                    4 B    trailer marker (RocketMQ leaves these bytes zero)
    @4092  crc32 of bytes [4032, 4080) uint32  the copy's checksum
    = 4096 bytes

RocketMQ reads and rewrites bytes [0, 48) and never touches the trailer.  So, at open:

| marker | copy's CRC | fields == copy | state   | trusted                                    |
|--------|------------|----------------|---------|--------------------------------------------|
| absent | —          | —              | FOREIGN | the fields, as RocketMQ trusts them        |
| MQCK   | good       | yes            | VALID   | the fields                                 |
| MQCK   | good       | no             | FOREIGN | the fields: RocketMQ rewrote them since    |
| MQCK   | bad        | —              | CORRUPT | nothing: recovery assumes nothing synced   |

A torn write of this page cannot mislead either: the fields lie in its first 512-byte sector
and the trailer in its last, each written whole by the device, so a torn page has either old
fields with a new copy or new fields with an old copy, and both read as FOREIGN with fields
that are whole.  (Files written by mqstore before the copy existed carry a CRC of bytes
[0, 40) at 4092; they read as VALID when it matches.)
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
_FIELDS = struct.Struct(">qqqqqq")
_TRAILER = struct.Struct(">4sI")
_MARKER = b"MQCK"
_TRAILER_POSITION = CHECKPOINT_FILE_SIZE_BYTES - _TRAILER.size
_COPY_POSITION = 4032
_OLD_CRC_BYTES = 40
"""Before the copy, the trailer's CRC covered the first five fields."""
assert _FIELDS.size == 48
assert _TRAILER_POSITION == 4088
assert _COPY_POSITION + _FIELDS.size + 8 == _TRAILER_POSITION

SAFETY_MARGIN_MS = 3000
"""RocketMQ subtracts 3 s from the checkpoint's timestamps before trusting them."""


class CheckpointState(enum.Enum):
    VALID = "valid"
    """Written by mqstore, CRC matches."""
    FOREIGN = "foreign"
    """Written by RocketMQ (no trailer, or fields rewritten since mqstore's last write):
    trusted as RocketMQ trusts it, with no checksum to verify."""
    MISSING = "missing"
    CORRUPT = "corrupt"


@dataclasses.dataclass
class CheckpointValues:
    physic_msg_timestamp_ms: int = 0
    logics_msg_timestamp_ms: int = 0
    index_msg_timestamp_ms: int = 0
    master_flushed_offset: int = 0
    confirm_physical_offset: int = 0
    reserved: int = 0

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
                      values.confirm_physical_offset, values.reserved)
    copy_end = _COPY_POSITION + _FIELDS.size
    page[_COPY_POSITION:copy_end] = page[:_FIELDS.size]
    _TRAILER.pack_into(page, _TRAILER_POSITION, _MARKER,
                       zlib.crc32(page[_COPY_POSITION:_TRAILER_POSITION - 8]))
    return bytes(page)


def read_checkpoint(path: Path) -> tuple[CheckpointValues, CheckpointState]:
    """The values and how far to trust them (the table in the module docstring)."""
    try:
        page = path.read_bytes()
    except FileNotFoundError:
        return CheckpointValues(), CheckpointState.MISSING
    if len(page) < CHECKPOINT_FILE_SIZE_BYTES:
        return CheckpointValues(), CheckpointState.CORRUPT
    values = CheckpointValues(*_FIELDS.unpack_from(page, 0))
    marker, crc = _TRAILER.unpack_from(page, _TRAILER_POSITION)
    if marker != _MARKER:
        if marker != bytes(4) or crc != 0:
            return CheckpointValues(), CheckpointState.CORRUPT
        return values, CheckpointState.FOREIGN
    copy = page[_COPY_POSITION:_COPY_POSITION + _FIELDS.size]
    if crc == zlib.crc32(page[_COPY_POSITION:_TRAILER_POSITION - 8]):
        if copy == page[:_FIELDS.size]:
            return values, CheckpointState.VALID
        return values, CheckpointState.FOREIGN
    if crc == zlib.crc32(page[:_OLD_CRC_BYTES]) and not any(page[_OLD_CRC_BYTES:_TRAILER_POSITION]):
        return values, CheckpointState.VALID
    return CheckpointValues(), CheckpointState.CORRUPT
