"""What the power-loss writer puts and how an acknowledgement is recorded.

The four store configurations (`VARIANTS`), the messages (bodies unique per cycle and
sequence number, so the verifier can rebuild any of them), and the ack log: one line per
acknowledged message, appended by the writer to a file outside the mount, flushed per line.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from pathlib import Path

from mqstore.storage import FlushMode, Message, StoreConfig

SEGMENT_SIZE_BYTES = 1 << 20
"""1 MiB segments: a cycle of 0.2–2 s rolls several (rolls, BLANK tails, new files)."""

TOPICS = ("PowerA", "PowerB", "PowerC")
QUEUE_COUNT = 4
KEYED_EVERY = 3
"""Every third message has a key (the index is built by dispatch and checked by key)."""
BODY_BYTES_MIN = 64
BODY_BYTES_SPREAD = 1400
"""Bodies are 64–1463 bytes: about 1,300 records per 1 MiB segment."""


@dataclasses.dataclass(frozen=True)
class Variant:
    """One store configuration the power-loss test cycles through."""

    name: str
    flush_mode: FlushMode
    pool_enabled: bool

    def store_config(self) -> StoreConfig:
        # Disk ratios at 1.0: retention must never delete or refuse because of how full the
        # machine's disk is (lossyfs reports the backing file system's usage).
        return StoreConfig.for_small_segments(SEGMENT_SIZE_BYTES, flush_mode=self.flush_mode,
                                              pool_enabled=self.pool_enabled,
                                              disk_max_used_ratio=1.0,
                                              disk_clean_forcibly_ratio=1.0,
                                              disk_warning_ratio=1.0)


VARIANTS = (
    Variant("sync-flush-pool-off", FlushMode.SYNC, pool_enabled=False),
    Variant("sync-flush-pool-on", FlushMode.SYNC, pool_enabled=True),
    Variant("async-flush-pool-off", FlushMode.ASYNC, pool_enabled=False),
    Variant("async-flush-pool-on", FlushMode.ASYNC, pool_enabled=True),
)
VARIANTS_BY_NAME = {variant.name: variant for variant in VARIANTS}


def body_for(cycle: int, sequence: int) -> bytes:
    stem = f"{cycle}:{sequence}:".encode()
    filler_bytes = BODY_BYTES_MIN + (sequence * 7919 + cycle * 104729) % BODY_BYTES_SPREAD
    return stem + bytes([(cycle * 31 + sequence) % 251]) * filler_bytes


def key_for(cycle: int, sequence: int) -> str | None:
    return f"k-{cycle}-{sequence}" if sequence % KEYED_EVERY == 0 else None


def message_for(cycle: int, sequence: int, topic: str, queue_id: int) -> Message:
    key = key_for(cycle, sequence)
    return Message(topic, queue_id, body_for(cycle, sequence), tags=f"tag{sequence % 5}",
                   keys=(key,) if key is not None else ())


@dataclasses.dataclass(frozen=True)
class Ack:
    """One acknowledged message: where the store said it put it."""

    cycle: int
    sequence: int
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size_bytes: int

    @property
    def end_position(self) -> int:
        return self.physical_offset + self.size_bytes

    @property
    def key(self) -> str | None:
        return key_for(self.cycle, self.sequence)

    def line(self) -> str:
        return (f"{self.cycle} {self.sequence} {self.topic} {self.queue_id} {self.queue_offset} "
                f"{self.physical_offset} {self.size_bytes}\n")

    @classmethod
    def parse(cls, line: str) -> Ack:
        cycle, sequence, topic, queue_id, queue_offset, physical, size = line.split()
        return cls(int(cycle), int(sequence), topic, int(queue_id), int(queue_offset),
                   int(physical), int(size))


class AckLog:
    """Appends acks to a file on the real file system, one write and flush per line: a
    kill -9 loses at most a line never completed, which the reader ignores."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 (lives as long as the writer)
        self._lock = threading.Lock()

    def record(self, acks: Iterable[Ack]) -> None:
        text = "".join(ack.line() for ack in acks)
        if text:
            with self._lock:
                self._file.write(text)
                self._file.flush()


def read_acks(paths: Iterable[Path]) -> list[Ack]:
    acks = []
    for path in paths:
        for line in path.read_text().splitlines(keepends=True):
            if line.endswith("\n"):  # a line cut by the kill was never a complete ack
                acks.append(Ack.parse(line))
    return acks
