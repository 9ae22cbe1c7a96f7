"""Engine append throughput for 1 KiB messages beside this machine's limits, in one run.

    .venv/bin/python bench/append.py [--messages 200000] [--runs 3] [--dir DIR]
                                     [--only-async] [--embedded]

Limits, measured first and again last (the VM's disk is noisy; both are printed):
  raw-mmap+crc   a bare Python loop: pack a 100-byte header into a pre-zeroed MAP_SHARED
                 mapping, slice-assign the 1 KiB body, zlib.crc32 it.  No locks, no
                 objects: the ceiling of any Python append path that CRCs its bodies.
  seq-fdatasync  sequential 1 MiB os.write + one fdatasync per 16 MiB: the disk's durable
                 bandwidth (MB/s), the ceiling of sync flush in bytes.

Engine cases: single put and put_batch(32), async flush, pool off and on; sync flush (group
commit, left out with --only-async) with 1, 16 and 64 concurrent producers, pool off and
on, twice: as OS threads
calling the blocking `put`, and as asyncio tasks in one thread awaiting `put_callback`'s
acknowledgement (how the writer service runs concurrent requests).  With threads, every group
commit wakes each producer through the GIL, and that handoff, not the disk, bounds the rate.

Each figure is the median of `--runs` runs (min–max beside it); ratios are against the raw
loop's median from the same run.  Segments are 256 MiB, preallocated the default way;
dispatch is off, as in the writer service (the indexer process builds the consume queues).
`--embedded` adds single put and put_batch(32) on the embedded default,
`MessageStore.open(dir)` with no config: 1 GiB segments, pool off, async flush, and the
indexer dispatching in the same process (on the same GIL as the puts).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import mmap
import os
import shutil
import statistics
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from mqstore.services.writer.completions import LoopCompletions
from mqstore.storage import FlushMode, Message, MessageStore, PutResult, StoreConfig

BODY = bytes(range(256)) * 4
HEADER = struct.Struct(">iiiiiqqiq8sq8siqi")
SEGMENT_BYTES = 256 << 20
BATCH = 32


def raw_mmap_crc(directory: Path, count: int) -> float:
    """msg/s of the bare loop into a pre-zeroed mapping."""
    record_bytes = HEADER.size + len(BODY)
    size = (count * record_bytes // mmap.PAGESIZE + 1) * mmap.PAGESIZE
    path = directory / "raw"
    with path.open("wb") as file:
        for _ in range(size >> 20):
            file.write(bytes(1 << 20))
        file.write(bytes(size - (size >> 20 << 20)))
        file.flush()
        os.fdatasync(file.fileno())
    fd = os.open(path, os.O_RDWR)
    mapping = mmap.mmap(fd, size)
    pack, crc32, body, body_len = HEADER.pack_into, zlib.crc32, BODY, len(BODY)
    hosts = b"\x7f\0\0\1\0\0\x2a\x9f"
    started = time.perf_counter()
    position = 0
    for index in range(count):
        pack(mapping, position, record_bytes, -626843481, crc32(body) & 0x7FFFFFFF, 0, 0,
             index, position, 0, 0, hosts, 0, hosts, 0, 0, body_len)
        start = position + HEADER.size
        mapping[start:start + body_len] = body
        position = start + body_len
    elapsed = time.perf_counter() - started
    mapping.close()
    os.close(fd)
    path.unlink()
    return count / elapsed


def seq_fdatasync_mb_s(directory: Path, total_mib: int = 256) -> float:
    path = directory / "seq"
    chunk = bytes(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    started = time.perf_counter()
    for index in range(total_mib):
        os.write(fd, chunk)
        if index % 16 == 15:
            os.fdatasync(fd)
    os.fdatasync(fd)
    elapsed = time.perf_counter() - started
    os.close(fd)
    path.unlink()
    return total_mib * (1 << 20) / 1e6 / elapsed


def _open(directory: Path, *, flush: FlushMode, pool: bool | None) -> MessageStore:
    # The commit log writer as the writer service runs it: consume queues and the index are
    # built by the separate indexer process, not by dispatch in this one.  `pool=None`: the
    # embedded default instead (no config; dispatch in this process).
    if pool is None:
        store = MessageStore.open(directory / "store")
        assert store.put(Message("Warmup", 0, BODY)).ok
        return store
    config = StoreConfig.for_small_segments(SEGMENT_BYTES, flush_mode=flush, pool_enabled=pool,
                                            pool_buffer_count=3,
                                            message_body_size_bytes_max=4 << 20,
                                            dispatch_enabled=False)
    store = MessageStore.open(directory / "store", config)
    # Untimed: the first put waits for the first segment's preallocation, a once-per-open
    # cost the raw loop does not pay either (its file is zero-filled before timing).
    assert store.put(Message("Warmup", 0, BODY)).ok
    return store


def engine_asyncio(directory: Path, count: int, *, pool: bool, producers: int) -> float:
    """Sync flush with `producers` asyncio tasks in one thread, as the writer service runs
    its concurrent requests: each puts with `store.put_callback` and awaits a future that
    the group commit completes through `LoopCompletions` (one loop wakeup per group)."""
    store = _open(directory, flush=FlushMode.SYNC, pool=pool)
    per_producer = count // producers

    async def produce(completions: LoopCompletions, queue_id: int) -> None:
        message = Message("Bench", queue_id, BODY)
        for _ in range(per_producer):
            acknowledged: asyncio.Future[PutResult]
            acknowledged, deliver = completions.future()
            store.put_callback(message, deliver)
            result = await acknowledged
            assert result.ok, result

    async def run_all() -> None:
        completions = LoopCompletions(asyncio.get_running_loop())
        await asyncio.gather(*(produce(completions, q) for q in range(producers)))

    started = time.perf_counter()
    asyncio.run(run_all())
    elapsed = time.perf_counter() - started
    store.close()
    shutil.rmtree(directory / "store")
    return per_producer * producers / elapsed


def engine(directory: Path, count: int, *, batch: bool, flush: FlushMode, pool: bool | None,
           producers: int) -> float:
    """`producers` threads calling the blocking put / put_batch."""
    store = _open(directory, flush=flush, pool=pool)
    per_producer = count // producers
    messages = [Message("Bench", q, BODY) for q in range(max(producers, 4))]
    failures: list[str] = []

    def produce(producer: int) -> None:
        message = messages[producer]
        if batch:
            chunk = [message] * BATCH
            for _ in range(per_producer // BATCH):
                results = store.put_batch(chunk)
                if not results[-1].ok:
                    failures.append(results[-1].reason)
                    return
        else:
            put = store.put
            for _ in range(per_producer):
                if not put(message).ok:
                    failures.append("put failed")
                    return

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    store.close()
    shutil.rmtree(directory / "store")
    assert not failures, failures[:3]
    done = per_producer // BATCH * BATCH if batch else per_producer
    return done * producers / elapsed


SETTLE_S = 2.0
"""Pause before every measurement, after `os.sync()`.  This VM's ext4 is mounted with
`discard`: deleting the previous case's 256 MiB segments makes the virtual disk discard them,
and the host's work on that slowed the next case by up to 30% (a batch put case measured at
553k msg/s right after deleting 512 MiB, 750k a few seconds later).  Every case, the limits
included, starts after the same pause."""


def median_of(runs: int, measure: Callable[[], float], *,
              settle_s: float = SETTLE_S) -> tuple[float, float, float]:
    values = []
    for _ in range(runs):
        os.sync()
        time.sleep(settle_s)
        values.append(measure())
    return statistics.median(values), min(values), max(values)


def _row(name: str, result: tuple[float, float, float], raw: float, message_mb: float) -> None:
    print(f"{name:<44}{result[0]:>11,.0f}{f'{result[1]:,.0f}–{result[2]:,.0f}':>20}"
          f"{result[0] * message_mb:>9,.0f}{result[0] / raw:>8.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--sync-messages", type=int, default=40_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--settle-s", type=float, default=SETTLE_S,
                        help="pause before each measurement (see SETTLE_S)")
    parser.add_argument("--only-async", action="store_true",
                        help="only the async flush cases (the put path's own cost)")
    parser.add_argument("--embedded", action="store_true",
                        help="also the embedded default (no config, dispatch in process)")
    arguments = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="mqstore-bench-", dir=arguments.dir))
    n, runs = arguments.messages, arguments.runs
    median = functools.partial(median_of, settle_s=arguments.settle_s)
    message_mb = (HEADER.size + len(BODY)) / 1e6
    try:
        raw_mmap_crc(directory, n // 4)  # discarded warm-up: first touch of guest memory
        raw = median(runs, lambda: raw_mmap_crc(directory, n))
        disk = median(runs, lambda: seq_fdatasync_mb_s(directory))
        print(f"{'case':<44}{'msg/s':>11}{'min–max':>20}{'MB/s':>9}{'× raw':>8}")
        print(f"{'limit: raw mmap write + crc32 loop':<44}{raw[0]:>11,.0f}"
              f"{f'{raw[1]:,.0f}–{raw[2]:,.0f}':>20}{raw[0] * message_mb:>9,.0f}{1:>8.2f}")
        print(f"{'limit: sequential write + fdatasync (MB/s)':<44}{'':>11}"
              f"{f'{disk[1]:,.0f}–{disk[2]:,.0f}':>20}{disk[0]:>9,.0f}")
        cases: list[tuple[str, bool, FlushMode, bool | None, int, int]] = [
            ("single put, async flush, pool off", False, FlushMode.ASYNC, False, 1, n),
            ("single put, async flush, pool on", False, FlushMode.ASYNC, True, 1, n),
            ("batch put (32), async flush, pool off", True, FlushMode.ASYNC, False, 1, n),
            ("batch put (32), async flush, pool on", True, FlushMode.ASYNC, True, 1, n),
        ]
        if arguments.embedded:
            cases += [("single put, embedded default", False, FlushMode.ASYNC, None, 1, n),
                      ("batch put (32), embedded default", True, FlushMode.ASYNC, None, 1, n)]
        for name, batch, flush, pool, producers, count in cases:
            result = median(runs, lambda b=batch, f=flush, p=pool, k=producers, c=count:
                               engine(directory, c, batch=b, flush=f, pool=p, producers=k))
            _row(name, result, raw[0], message_mb)
        for producers in () if arguments.only_async else (1, 16, 64):
            count = arguments.sync_messages if producers > 1 else arguments.sync_messages // 10
            for pool in (False, True):
                pool_text = "on" if pool else "off"
                threads = median(runs, lambda k=producers, p=pool, c=count: engine(
                    directory, c, batch=False, flush=FlushMode.SYNC, pool=p, producers=k))
                _row(f"sync flush, {producers} producer threads, pool {pool_text}", threads,
                     raw[0], message_mb)
                tasks = median(runs, lambda k=producers, p=pool, c=count: engine_asyncio(
                    directory, c, pool=p, producers=k))
                _row(f"sync flush, {producers} asyncio producers, pool {pool_text}", tasks,
                     raw[0], message_mb)
        raw_after = median(runs, lambda: raw_mmap_crc(directory, n))
        disk_after = median(runs, lambda: seq_fdatasync_mb_s(directory))
        print(f"limits again at the end: raw loop {raw_after[0]:,.0f} msg/s, "
              f"sequential fdatasync {disk_after[0]:,.0f} MB/s")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
