"""Preparing a segment file before the put path first writes into it.

Measured on this project's 2-core VM (ext4 without journal, virtio disk) with
`python bench/prealloc.py`; see that script for the method and the full table.
MEASUREMENTS_PLACEHOLDER

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

from .config import PreallocateMethod

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


def prepare_file(fd: int, size_bytes: int, method: PreallocateMethod) -> None:
    """Give the file its full size and, per `method`, its blocks."""
    os.ftruncate(fd, size_bytes)
    if method is PreallocateMethod.FALLOCATE:
        os.posix_fallocate(fd, 0, size_bytes)
    elif method is PreallocateMethod.ZERO_FILL:
        zero_fill(fd, 0, size_bytes)
        os.fdatasync(fd)


def zero_fill(fd: int, start_position: int, end_position: int) -> None:
    """Write zeros over [start, end) with pwrite (never through a mapping: no GIL held)."""
    position = start_position
    while position < end_position:
        chunk = min(ZERO_CHUNK_BYTES, end_position - position)
        written = os.pwrite(fd, _ZEROS[:chunk] if chunk < ZERO_CHUNK_BYTES else _ZEROS,
                            position)
        assert written > 0
        position += written


def populate_for_write(mapping: mmap.mmap) -> bool:
    """Map every page of `mapping` writable now (MADV_POPULATE_WRITE), without the GIL.

    Returns False when the kernel does not support it (the mapping then faults lazily).
    """
    anchor = ctypes.c_char.from_buffer(mapping)
    try:
        address = ctypes.addressof(anchor)
        if _libc.madvise(address, len(mapping), MADV_POPULATE_WRITE) == 0:
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
