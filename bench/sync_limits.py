"""The disk's durable-write limits, measured on the same filesystem as a benchmark's store.

Each figure is MB/s of write + fdatasync in a loop for a few seconds: appending to a new file,
or overwriting one already written and synced (what the engine's preallocated segments see),
with blocks of 256 KiB and of a store's mean group size (bytes per group-commit fdatasync).
The VM's fdatasync latency drifts 2–10× between windows of seconds, so a limit is measured
right after the case it is compared with, and the alignment comparison is paired.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def measure_limits(directory: Path, prezeroed: Path, group_bytes: int,
                   seconds: float) -> dict[str, float]:
    """Blocks of 256 KiB and of the group size rounded to 4 KiB; and what alignment does to
    the device alone (`paired_alignment_mb_s`)."""
    block = max(4096, group_bytes // 4096 * 4096)
    unaligned, padded = paired_alignment_mb_s(prezeroed, block + 2048, 2 * seconds)
    return {"append_256k": fdatasync_mb_s(directory, 256 << 10, seconds, prezeroed=None),
            "append_group": fdatasync_mb_s(directory, block, seconds, prezeroed=None),
            "overwrite_256k": fdatasync_mb_s(directory, 256 << 10, seconds, prezeroed=prezeroed),
            "overwrite_group": fdatasync_mb_s(directory, block, seconds, prezeroed=prezeroed),
            "overwrite_unaligned": unaligned, "overwrite_padded": padded}


def paired_alignment_mb_s(prezeroed: Path, payload_bytes: int,
                          seconds: float) -> tuple[float, float]:
    """Payload MB/s of groups of `payload_bytes` (not a multiple of 4 KiB) + fdatasync,
    overwriting a pre-zeroed file: (written as they are, so each sync ends mid-page and the
    next writes that page again; padded to the next 4 KiB, the padding not counted).  The
    two alternate in 0.1 s slices, so the disk's drift hits both alike."""
    pad = -payload_bytes % 4096
    assert pad
    block = os.urandom(payload_bytes + pad)
    fd = os.open(prezeroed, os.O_WRONLY)
    wrap = (os.fstat(fd).st_size - len(block)) // 4096 * 4096
    totals = {False: [0, 0.0], True: [0, 0.0]}  # padded → [payload bytes, seconds]
    position, padded = 0, False
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < seconds:
            if padded:
                position += -position % 4096
            size = payload_bytes + (pad if padded else 0)
            slice_started = time.perf_counter()
            while time.perf_counter() - slice_started < 0.1:
                os.pwrite(fd, block[:size], position % wrap)
                os.fdatasync(fd)
                position += size
                totals[padded][0] += payload_bytes
            totals[padded][1] += time.perf_counter() - slice_started
            padded = not padded
    finally:
        os.close(fd)
    return totals[False][0] / 1e6 / totals[False][1], totals[True][0] / 1e6 / totals[True][1]


def fdatasync_mb_s(directory: Path, block_bytes: int, seconds: float, *,
                   prezeroed: Path | None) -> float:
    """MB/s of write(block) + fdatasync in a loop: appending to a new file, or overwriting
    `prezeroed` (already written and synced) from its start."""
    block = os.urandom(block_bytes)
    path = directory / "sync-limit"
    if prezeroed is None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        wrap = 1 << 62
    else:
        fd = os.open(prezeroed, os.O_WRONLY)
        wrap = os.fstat(fd).st_size - block_bytes
    written = 0
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < seconds:
            os.pwrite(fd, block, written % wrap)
            os.fdatasync(fd)
            written += block_bytes
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        if prezeroed is None:
            path.unlink()
    return written / 1e6 / elapsed


def prezero(directory: Path, size_bytes: int) -> Path:
    path = directory / "prezeroed"
    chunk = bytes(1 << 20)
    with path.open("wb") as file:
        for _ in range(size_bytes >> 20):
            file.write(chunk)
        file.flush()
        os.fdatasync(file.fileno())
    return path
