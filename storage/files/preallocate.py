"""Preparing a segment file before the put path first writes into it.

Measured on this project's 2-core VM (kernel 6.18, ext4 without journal, virtio disk) with
`python bench/prealloc.py --segment-mib 256 --runs 3` (medians of 3; 1124-byte records with
CRC written into the mapping until the 256 MiB segment is full, then 64 KiB write+fdatasync
batches over a freshly prepared segment):

    method                    prep ms/GiB  first-fill msg/s  first fsync  64 KiB sync p50/p99
    none (sparse)                       0         1,083,044       2.8 ms       207 / 591 µs
    fallocate                           1           525,014       4.2 ms       263 / 752 µs
    zero-fill (1 MiB pwrite)        2,312         1,446,783       0.6 ms       282 / 465 µs  (*)
    MADV_POPULATE_WRITE only          240         1,507,025      74.4 ms       150 / 240 µs  (**)
    populate (falloc+madv+sync)       444         1,184,291       0.3 ms       154 / 239 µs

(*)  ext4 on this kernel keeps pages written in 1 MiB chunks in 1 MiB folios, and an fsync
     writes back whole folios: 32 MiB of 64 KiB syncs wrote 512 MiB to the disk (16×).
(**) the populated zeros are dirty: the hot path's first fdatasync writes the whole segment
     (a 72–75 ms stall per 256 MiB, ~0.4 s per GiB).  The sync at the end of `populate`
     moves that write into the allocator thread.

So `populate` is the default for writes through the mapping: sparse and fallocate put every
fault and extent conversion on the hot path (and varied 2–3× between runs); pre-touching
with a Python loop holds the GIL (the main loop ran at 19% meanwhile) where madvise through
ctypes does not.  With 18 KB group-commit syncs it writes 5.8× the synced bytes to the
device, like sparse (6.0×), where 1 MiB zero-fill writes 59×.

With the transient store pool on, the put path writes into pool buffers and the commit
service pwrites into the file, so a populated mapping buys the hot path nothing and its
preparation (zeroing and syncing a whole segment) competes with it.  Engine put_batch of
1 KiB messages, pool on, async flush, 256 MiB segments, medians of 3 (noisy: ranges beside):

    populate    386,691 msg/s  (382,709–569,078)
    fallocate   710,584 msg/s  (585,893–730,127)
    none        698,677 msg/s  (620,911–758,114)

So `auto` (the default) uses fallocate with the pool on under async flush: it still reserves
the blocks, so a full disk is found by the allocator and not by the commit service.

All preparation runs in the allocator's background thread and releases the GIL: zero-fill is
`os.pwrite` of 1 MiB chunks, fallocate is one syscall, and the optional warm-up is
`madvise(MADV_POPULATE_WRITE)` called through ctypes (Python 3.11's `mmap.madvise` holds the
GIL for the whole call: 35 ms stalls per 256 MiB were measured).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os

from ..config import PreallocateMethod

ZERO_CHUNK_BYTES = 1 << 20
"""Zero-fill writes 1 MiB at a time: large enough that the syscall cost vanishes, small
enough that the thread drops the GIL often."""

_ZEROS = bytes(ZERO_CHUNK_BYTES)
MADV_POPULATE_WRITE = 23
"""Linux ≥ 5.14; Python 3.11's mmap module does not export it."""

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.madvise.restype = ctypes.c_int
_libc.mlock.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mlock.restype = ctypes.c_int


def prepare_file(fd: int, size_bytes: int, method: PreallocateMethod, *,
                 allocate_bytes: int | None = None) -> None:
    """Give the file its full size and, per `method`, its blocks (before it is mapped): all
    of them, or with FALLOCATE only the first `allocate_bytes` (a consume queue file stays
    sparse beyond them and reserves more as its entries grow, consume_queue_file.py)."""
    assert method is not PreallocateMethod.AUTO, "resolve AUTO with the store's config"
    assert allocate_bytes is None or method is PreallocateMethod.FALLOCATE
    os.ftruncate(fd, size_bytes)
    if method is PreallocateMethod.FALLOCATE and allocate_bytes is not None:
        os.posix_fallocate(fd, 0, min(allocate_bytes, size_bytes))
    elif method in (PreallocateMethod.FALLOCATE, PreallocateMethod.POPULATE):
        os.posix_fallocate(fd, 0, size_bytes)
    elif method is PreallocateMethod.ZERO_FILL:
        zero_fill(fd, 0, size_bytes)
        os.fdatasync(fd)


def prepare_mapping(fd: int, mapping: mmap.mmap, method: PreallocateMethod, *,
                    warmup: bool, warmup_bytes: int | None = None) -> None:
    """Per `method` (and the optional warm-up, of the first `warmup_bytes` only when given:
    populating a hole for write would allocate it), fault the mapping in now, not on first
    write."""
    if method is PreallocateMethod.POPULATE:
        if not populate_for_write(mapping):
            zero_fill(fd, 0, len(mapping))  # kernel < 5.14: the next best, measured above
        os.fdatasync(fd)
    elif warmup:
        populate_for_write(mapping, end_position=warmup_bytes)


def zero_fill(fd: int, start_position: int, end_position: int) -> None:
    """Write zeros over [start, end) with pwrite (never through a mapping: no GIL held)."""
    position = start_position
    while position < end_position:
        chunk = min(ZERO_CHUNK_BYTES, end_position - position)
        written = os.pwrite(fd, _ZEROS[:chunk] if chunk < ZERO_CHUNK_BYTES else _ZEROS,
                            position)
        assert written > 0
        position += written


def populate_for_write(mapping: mmap.mmap, *, start_position: int = 0,
                       end_position: int | None = None) -> bool:
    """Map the pages of `mapping` in [start, end) writable now (MADV_POPULATE_WRITE), without
    the GIL; `start_position` is a page multiple, `end_position` defaults to the end.

    Returns False when the kernel does not support it (the mapping then faults lazily).
    """
    assert start_position % mmap.PAGESIZE == 0
    end = len(mapping) if end_position is None else min(end_position, len(mapping))
    if end <= start_position:
        return True
    anchor = ctypes.c_char.from_buffer(mapping)
    try:
        address = ctypes.addressof(anchor) + start_position
        if _libc.madvise(address, end - start_position, MADV_POPULATE_WRITE) == 0:
            return True
        code = ctypes.get_errno()
        if code in (errno.EINVAL, errno.ENOSYS):
            return False
        raise OSError(code, f"madvise(MADV_POPULATE_WRITE): {os.strerror(code)}")
    finally:
        del anchor


def lock_in_memory(mapping: mmap.mmap) -> None:
    """mlock the whole mapping (the pool's buffers, when `pool_lock_memory` is on)."""
    anchor = ctypes.c_char.from_buffer(mapping)
    try:
        if _libc.mlock(ctypes.addressof(anchor), len(mapping)) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"mlock of {len(mapping)} bytes: {os.strerror(code)} (raise "
                                f"RLIMIT_MEMLOCK or set pool_lock_memory=false)")
    finally:
        del anchor
