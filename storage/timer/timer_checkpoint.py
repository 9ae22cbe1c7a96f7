"""`TimerCheckpoint`: how far the timer store has enqueued, flushed and delivered.

    <store directory>/config/timercheck      4096 bytes

Layout, big-endian (bytes 0..56 are RocketMQ 5's `TimerCheckpoint`; RocketMQ leaves the rest
zero and never reads it, mqstore adds its own fields after a marker):

| offset | size | field                                                                    |
|--------|------|--------------------------------------------------------------------------|
| 0      | 8    | last_read_time_ms: dequeue progress, every slot before it is delivered   |
| 8      | 8    | last_timer_log_flush_position: the timer log is synced below it          |
| 16     | 8    | last_timer_queue_offset: next `rmq_sys_wheel_timer`/0 offset to enqueue  |
| 24     | 8    | master_timer_queue_offset: the same, as a master last reported it        |
| 32     | 8    | data_version_state_version                                               |
| 40     | 8    | data_version_timestamp_ms                                                |
| 48     | 8    | data_version_counter                                                     |
| 56     | 4    | b"MQTC" if mqstore wrote the fields below (zero from RocketMQ)           |
| 60     | 4    | precision_ms the wheel was written with                                  |
| 64     | 8    | delivery_scan_position: commit log position from which recovery looks    |
|        |      | for copies delivered after this checkpoint (the writer's timer schedule) |
| 72     | 4024 | zeros                                                                    |
|        | 4096 | total                                                                    |
"""

from __future__ import annotations

import dataclasses
import os
import struct
from pathlib import Path

from ..errors import StoreFormatError

FILE_NAME = "timercheck"
FILE_SIZE_BYTES = 4096
FIELDS = struct.Struct(">qqqqqqq4siq")
assert FIELDS.size == 72
MARKER = b"MQTC"


@dataclasses.dataclass(frozen=True)
class TimerProgress:
    last_read_time_ms: int = 0
    last_timer_log_flush_position: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp_ms: int = 0
    counter: int = 0
    precision_ms: int = 0
    """0: not written by mqstore (RocketMQ's, or no file)."""
    delivery_scan_position: int = -1
    """-1: unknown (RocketMQ's file, or none): recovery looks for no delivered copies."""

    def __post_init__(self) -> None:
        assert self.last_read_time_ms >= 0
        assert self.last_timer_log_flush_position >= 0
        assert self.last_timer_queue_offset >= 0


class TimerCheckpoint:
    def __init__(self, store_directory: Path) -> None:
        self.path = store_directory / "config" / FILE_NAME

    def read(self) -> TimerProgress:
        """The progress last written; all zero if there is no file."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return TimerProgress()
        if len(data) != FILE_SIZE_BYTES:
            raise StoreFormatError(f"{self.path}: {len(data)} bytes, not {FILE_SIZE_BYTES}")
        (read_ms, flush_position, queue_offset, master_offset, state_version, timestamp_ms,
         counter, marker, precision_ms, scan_position) = FIELDS.unpack_from(data)
        if marker != MARKER:
            precision_ms, scan_position = 0, -1
        return TimerProgress(read_ms, flush_position, queue_offset, master_offset,
                             state_version, timestamp_ms, counter, precision_ms,
                             scan_position)

    def write(self, progress: TimerProgress) -> None:
        """Write and sync the whole page in place (RocketMQ maps it and syncs it in place:
        the fields share one 512-byte sector, written whole)."""
        assert progress.precision_ms > 0
        page = bytearray(FILE_SIZE_BYTES)
        FIELDS.pack_into(page, 0, progress.last_read_time_ms,
                         progress.last_timer_log_flush_position,
                         progress.last_timer_queue_offset, progress.master_timer_queue_offset,
                         progress.state_version, progress.timestamp_ms, progress.counter,
                         MARKER, progress.precision_ms, progress.delivery_scan_position)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.pwrite(fd, page, 0)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        assert self.read() == progress
