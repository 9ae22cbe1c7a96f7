"""The `queue-offsets` file: the writer's own record of every queue's next offset.

The put path stamps each record with its queue's next offset (QUEUEOFFSET), so a writer
that opens a store must know every queue's next offset, however the consume queues (which
another process may build, lose or be rebuilding) look.  This file is a snapshot of them at
a position of the log, written by the writer alone; at open, the offsets are the
snapshot's, raised by the records recovery scans from its position on (opening.py).  The
indexer also uses it to notice a consume queue that lost entries (dispatch/indexer.py).

    @0    magic          4 B     b"MQQO"
    @4    version        uint16  1
    @6    zeros          2 B
    @8    position       int64   every record below it is counted in the offsets
    @16   count          uint32  queues that follow
    @20   queues         count × (topic length uint8, topic bytes (ASCII), queue id int32,
                                  next offset int64)
    end   crc32          uint32  of every byte before it
    total: 24 + Σ (13 + topic length) bytes

Written whole under a name in `creating/`, synced, renamed over the old file and the name
synced: a reader finds the previous snapshot or the new one, never a mix.  A snapshot whose
position lies beyond where recovery found the log's end (a power loss took its last bytes)
claims offsets no record holds, and is not used.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import struct
import zlib
from pathlib import Path

from ..format.volume import CREATING_DIRECTORY, QUEUE_OFFSETS_FILE, creating_name
from .io import make_directories, publish_prepared

log = logging.getLogger(__name__)

QueueOffsets = dict[tuple[str, int], int]

_HEADER = struct.Struct(">4sHxxqI")
_QUEUE_TAIL = struct.Struct(">iq")
_CRC = struct.Struct(">I")
_MAGIC = b"MQQO"
_VERSION = 1
assert _HEADER.size == 20
assert _QUEUE_TAIL.size == 12


@dataclasses.dataclass(frozen=True)
class QueueOffsetsSnapshot:
    position: int
    """Every record below this log position is counted in `offsets`."""
    offsets: QueueOffsets


def encode_queue_offsets(snapshot: QueueOffsetsSnapshot) -> bytes:
    parts = [_HEADER.pack(_MAGIC, _VERSION, snapshot.position, len(snapshot.offsets))]
    for (topic, queue_id), next_offset in sorted(snapshot.offsets.items()):
        topic_bytes = topic.encode("ascii")
        assert len(topic_bytes) <= 255
        parts += (bytes((len(topic_bytes),)), topic_bytes,
                  _QUEUE_TAIL.pack(queue_id, next_offset))
    data = b"".join(parts)
    return data + _CRC.pack(zlib.crc32(data))


def decode_queue_offsets(data: bytes) -> QueueOffsetsSnapshot | None:
    """The snapshot, or None if the bytes are not a whole, checksummed one."""
    if len(data) < _HEADER.size + _CRC.size:
        return None
    (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
    if crc != zlib.crc32(data[:-_CRC.size]):
        return None
    magic, version, position, count = _HEADER.unpack_from(data, 0)
    if magic != _MAGIC or version != _VERSION:
        return None
    offsets: QueueOffsets = {}
    cursor = _HEADER.size
    for _ in range(count):
        length = data[cursor]
        topic = data[cursor + 1:cursor + 1 + length].decode("ascii")
        cursor += 1 + length
        queue_id, next_offset = _QUEUE_TAIL.unpack_from(data, cursor)
        cursor += _QUEUE_TAIL.size
        offsets[topic, queue_id] = next_offset
    if cursor != len(data) - _CRC.size:
        return None
    return QueueOffsetsSnapshot(position, offsets)


def read_queue_offsets(store_directory: Path) -> QueueOffsetsSnapshot | None:
    """The last snapshot written, or None (none yet, or unreadable: logged)."""
    path = store_directory / QUEUE_OFFSETS_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    snapshot = decode_queue_offsets(data)
    if snapshot is None:
        log.warning("%s is not a whole queue offset snapshot: ignored", path)
    return snapshot


def write_queue_offsets(store_directory: Path, snapshot: QueueOffsetsSnapshot) -> None:
    """Replace the snapshot durably (the module docstring)."""
    creating_directory = store_directory / CREATING_DIRECTORY
    make_directories(creating_directory, root=store_directory)
    creating = creating_directory / creating_name(QUEUE_OFFSETS_FILE)
    data = encode_queue_offsets(snapshot)
    fd = os.open(creating, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        written = os.write(fd, data)
        assert written == len(data), "a regular file takes a write whole"
        os.fdatasync(fd)
    finally:
        os.close(fd)
    publish_prepared(creating=creating, path=store_directory / QUEUE_OFFSETS_FILE)
