"""The buffer types the store reads records from, for tests that run a codec on each."""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from contextlib import contextmanager

BUFFER_KINDS = ("bytes", "bytearray", "memoryview", "mmap")


@contextmanager
def as_buffer(data: bytes, kind: str) -> Iterator[object]:
    """`data` as one of the buffer types the store reads records from."""
    if kind == "mmap":
        mapping = mmap.mmap(-1, max(len(data), 1))
        mapping[:len(data)] = data
        try:
            yield mapping
        finally:
            mapping.close()
    elif kind == "memoryview":
        with memoryview(bytearray(data)) as view:
            yield view
    else:
        yield bytes(data) if kind == "bytes" else bytearray(data)
