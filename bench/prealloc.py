#!/usr/bin/env python3
"""Benchmark: how should a background allocator prepare a new mmap'd segment?

For a fixed-size commit-log segment of S bytes (default 256 MiB) it compares:

  sparse            os.ftruncate(fd, S) only
  fallocate         os.posix_fallocate(fd, 0, S)
  zero-fill         os.pwrite zeros in 1 MiB chunks, then os.fdatasync
  zero-fill-64k/4k  same with 64 KiB / 4 KiB chunks (extra: on kernels with
                    large folios the pwrite size sets the page-cache folio
                    size, i.e. the unit that a later fdatasync writes back)
  pre-touch         ftruncate + mmap + one zero byte per page via the mmap
  madv-pop          ftruncate + mmap + madvise(MADV_POPULATE_WRITE) (ctypes)
  falloc+madv       posix_fallocate + mmap + madvise(MADV_POPULATE_WRITE)
  falloc+madv+sync  same, then os.fdatasync (extra: populating dirties every
                    page; without a sync the first hot-path fdatasync pays)

Each strategy ends with an fd and a MAP_SHARED mmap (mapping is part of prep).
Per strategy and run it measures:

  prep        wall time of open + strategy + mmap (ms, and ms per GiB)
  first write append 1124-byte records (100-byte header via struct.pack_into,
              1024-byte body via slice assignment, zlib.crc32 of the body)
              until the segment is full, no fsync meanwhile: msg/s, MB/s
              (1 MB = 1e6 B of records), minor faults (ru_minflt delta)
  fsync-full  one os.fdatasync(fd) after the whole segment was written
  sync loop   on a second, freshly prepared file (no sync in between): write
              --sync-batch bytes (default 64 KiB) into the mmap, os.fdatasync,
              repeated over the first 32 MiB; 1st batch latency (ms), p50/p99
              (us), minor faults, and MiB written by the block device during
              the loop (/sys/dev/block/M:m/stat, i.e. write amplification)

os.fdatasync is used throughout, never mmap.flush() (which holds the GIL).
Run 0 is a discarded warm-up; the strategy order rotates between runs; the
tables show the median and [min-max] over the measured runs.

Usage:  python bench/prealloc.py --segment-mib 256 --runs 3 [--dir PATH]
        [--sync-batch 17984] [--only sparse zero-fill-4k ...]
Files live in a temp directory created under --dir (default: the current
directory's filesystem) and removed afterwards.  Linux >= 5.14, stdlib only.
"""

import argparse
import ctypes
import mmap
import os
import platform
import resource
import shutil
import statistics
import struct
import sys
import tempfile
import time
import zlib

MADV_POPULATE_WRITE = 23  # not exported by Python 3.11's mmap module
REC, HDR, BODY = 1124, 100, 1024  # record = header + body
MAGIC = -626843481  # 0xDAA320A7, RocketMQ message magic code
SYNC_SPAN = 32 << 20
# RocketMQ-like header: totalSize magic bodyCRC queueId flag queueOffset
# physOffset sysFlag bornTs bornHost storeTs storeHost reconsume prepTxOff
# bodyLen topicLen topic  -> exactly 100 bytes
HEADER = struct.Struct(">iiIiiqqiqqqqiqib11s")
assert HEADER.size == HDR

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def madv_populate(fd, mm, size, sync=False):
    """madvise(MADV_POPULATE_WRITE) on the whole mapping (releases the GIL)."""
    buf = ctypes.c_char.from_buffer(mm)
    try:
        if _libc.madvise(ctypes.addressof(buf), size, MADV_POPULATE_WRITE):
            err = ctypes.get_errno()
            raise OSError(err, "madvise(MADV_POPULATE_WRITE): " + os.strerror(err))
    finally:
        del buf  # the exported buffer must be gone before mm.close()
    if sync:
        os.fdatasync(fd)


def zero_fill(fd, size, chunk):
    zeros = bytes(chunk)
    for off in range(0, size, chunk):
        n = min(chunk, size - off)
        if os.pwrite(fd, zeros[:n] if n < chunk else zeros, off) != n:
            raise OSError("short pwrite")
    os.fdatasync(fd)


def touch_pages(fd, mm, size):  # pure Python loop: holds the GIL throughout
    for off in range(0, size, mmap.PAGESIZE):
        mm[off] = 0


# name -> (step on fd before mmap, step on (fd, mapping, size) after, or None)
sparse, falloc = os.ftruncate, (lambda fd, size: os.posix_fallocate(fd, 0, size))
STRATEGIES = {
    "sparse": (sparse, None),
    "fallocate": (falloc, None),
    "zero-fill": (lambda fd, s: zero_fill(fd, s, 1 << 20), None),
    "zero-fill-64k": (lambda fd, s: zero_fill(fd, s, 64 << 10), None),
    "zero-fill-4k": (lambda fd, s: zero_fill(fd, s, 4 << 10), None),
    "pre-touch": (sparse, touch_pages),
    "madv-pop": (sparse, madv_populate),
    "falloc+madv": (falloc, madv_populate),
    "falloc+madv+sync": (falloc, lambda fd, mm, s: madv_populate(fd, mm, s, True)),
}


def minflt():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def disk_written_mib(tmp):
    """MiB written so far by the block device holding tmp (nan if unknown)."""
    dev = os.stat(tmp).st_dev
    try:
        with open(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/stat") as f:
            return int(f.read().split()[6]) * 512 / 2**20
    except (OSError, IndexError, ValueError):
        return float("nan")


def prepare(path, name, size):
    """Create and prepare a segment; returns (fd, mm, seconds)."""
    pre, post = STRATEGIES[name]
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    pre(fd, size)
    mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    if post:
        post(fd, mm, size)
    return fd, mm, time.perf_counter() - t0


def discard(path, fd, mm):
    mm.close()
    os.close(fd)
    os.unlink(path)


def first_write(mm, size):
    """Fill the mapping with records; returns (seconds, records, minflt)."""
    body = b"0123456789abcdef" * (BODY // 16)
    pack, crc32 = HEADER.pack_into, zlib.crc32
    born = time.time_ns() // 1_000_000
    rest = (0, born, 0, born, 0, 0, -1, BODY, 10, b"BenchTopic")  # sysFlag..topic
    n = size // REC
    f0, t0 = minflt(), time.perf_counter()
    pos = 0
    for i in range(n):
        crc = crc32(body)
        pack(mm, pos, REC, MAGIC, crc, 0, 0, i, pos, *rest)
        mm[pos + HDR : pos + REC] = body
        pos += REC
    return time.perf_counter() - t0, n, minflt() - f0


def sync_loop(mm, fd, size, batch):
    """batch-byte write + fdatasync over the first 32 MiB.
    Returns (1st ms, p50 us, p99 us, minflt)."""
    blk = b"\xab" * batch
    lat, f0 = [], minflt()
    for off in range(0, min(SYNC_SPAN, size) - batch + 1, batch):
        t0 = time.perf_counter_ns()
        mm[off : off + batch] = blk
        os.fdatasync(fd)
        lat.append((time.perf_counter_ns() - t0) / 1000)
    flt, first = minflt() - f0, lat[0] / 1000
    lat.sort()
    return first, lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))], flt


def one_run(tmp, name, size, batch):
    path = os.path.join(tmp, "seg-" + name)
    os.sync()  # settle writeback left over by the previous strategy
    fd, mm, prep = prepare(path, name, size)
    wt, n, flt = first_write(mm, size)
    t0 = time.perf_counter()
    os.fdatasync(fd)
    fsync_full = time.perf_counter() - t0
    discard(path, fd, mm)
    os.sync()
    fd, mm, _ = prepare(path, name, size)
    d0 = disk_written_mib(tmp)
    first, p50, p99, sflt = sync_loop(mm, fd, size, batch)
    disk = disk_written_mib(tmp) - d0
    discard(path, fd, mm)
    return {
        "prep_ms": prep * 1e3,
        "prep_ms_gib": prep * 1e3 / (size / 2**30),
        "msg_s": n / wt,
        "mb_s": n * REC / wt / 1e6,
        "minflt": flt,
        "fsync_ms": fsync_full * 1e3,
        "first_ms": first,
        "p50_us": p50,
        "p99_us": p99,
        "sync_flt": sflt,
        "disk_mib": disk,
    }


TABLES = [
    (
        "Preparation and first write (no fsync while filling)",
        [
            ("prep ms", "prep_ms", "{:.0f}"),
            ("prep ms/GiB", "prep_ms_gib", "{:.0f}"),
            ("write msg/s", "msg_s", "{:,.0f}"),
            ("MB/s", "mb_s", "{:.0f}"),
            ("minflt", "minflt", "{:.0f}"),
        ],
    ),
    (
        "Durable side: fdatasync after full segment; {batch} B write+fdatasync loop "
        "over the first 32 MiB of a fresh segment",
        [
            ("fsync-full ms", "fsync_ms", "{:.0f}"),
            ("sync 1st ms", "first_ms", "{:.1f}"),
            ("sync p50 us", "p50_us", "{:.0f}"),
            ("sync p99 us", "p99_us", "{:.0f}"),
            ("sync minflt", "sync_flt", "{:.0f}"),
            ("sync disk MiB", "disk_mib", "{:.0f}"),
        ],
    ),
]
COLS = [c for _, cols in TABLES for c in cols]


def print_table(title, cols, results, names):
    """Two lines per strategy: medians, then [min-max] across runs."""
    rows = [["strategy"] + [c[0] for c in cols]]
    for name in names:
        med, rng = [name], [""]
        for _, key, fmt in cols:
            vals = [r[key] for r in results[name]]
            med.append(fmt.format(statistics.median(vals)))
            rng.append(f"[{fmt.format(min(vals))}-{fmt.format(max(vals))}]")
        rows += [med, rng]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]

    def line(r):
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=False))
        )

    print(f"\n{title}  (median, [min-max] over runs)")
    print(line(rows[0]))
    print("-" * len(line(rows[0])))
    for r in rows[1:]:
        print(line(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--segment-mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3, help="measured runs (plus 1 warm-up)")
    ap.add_argument("--dir", default=".", help="parent of the temporary directory")
    ap.add_argument("--sync-batch", type=int, default=64 << 10, help="bytes per fdatasync")
    ap.add_argument("--only", nargs="+", choices=list(STRATEGIES), help="subset of strategies")
    args = ap.parse_args()
    size, batch = args.segment_mib << 20, args.sync_batch
    names = args.only or list(STRATEGIES)
    tmp = tempfile.mkdtemp(prefix="prealloc-bench-", dir=os.path.abspath(args.dir))
    print(
        f"# python {platform.python_version()}, kernel {platform.release()}, "
        f"{os.cpu_count()} cpus, segment {args.segment_mib} MiB, sync batch {batch} B, "
        f"runs {args.runs} (+1 warm-up), dir {tmp}, loadavg {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    results = {n: [] for n in names}
    try:
        for run in range(args.runs + 1):
            k = run % len(names)
            for name in names[k:] + names[:k]:
                r = one_run(tmp, name, size, batch)
                tag = "warm-up" if run == 0 else f"run {run}"
                print(
                    f"{tag:8} {name:16} "
                    + " ".join(f"{key}={fmt.format(r[key])}" for _, key, fmt in COLS),
                    flush=True,
                )
                if run:
                    results[name].append(r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for title, cols in TABLES:
        print_table(title.format(batch=batch), cols, results, names)
    print(f"\n# loadavg at end {os.getloadavg()[0]:.2f} (1-min; others' load adds noise)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
