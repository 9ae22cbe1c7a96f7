"""`IndexReader`: the `index/` files another process (the indexer) writes, read-only here.

Each file (layout in index_file.py) is opened `O_RDONLY` and mapped `ACCESS_READ` once.
Every query lists the directory (a handful of names) to pick up new files and drop the ones
retention deleted, and reads each file's header afresh through an `IndexFile` view, since the
indexer keeps appending.  What the indexer may be writing at that instant is harmless: an
entry is written before the slot that links it and before the header that counts it, and
every candidate is checked against the commit log by the caller's `key_matches` (as in
`IndexService.query`), which also refuses a position past what the writer published.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import IndexFileFormatError
from ..files.index_file import IndexFile, index_file_size_bytes
from ..format.volume import parse_index_file_name
from .index_service import search_files


class IndexReader:
    def __init__(self, directory: Path, *, hash_slot_count: int, index_count_max: int,
                 query_results_max: int) -> None:
        self.directory = directory
        self.hash_slot_count = hash_slot_count
        self.index_count_max = index_count_max
        self.query_results_max = query_results_max
        self._size_bytes = index_file_size_bytes(hash_slot_count=hash_slot_count,
                                                 index_count_max=index_count_max)
        self._mapped: dict[str, tuple[int, mmap.mmap]] = {}

    def query(self, *, topic: str, key: str, begin_ms: int, end_ms: int, max_results: int,
              key_matches: Callable[[int], bool], index_type: str | None = None) -> list[int]:
        """Positions of the messages of `topic` with `key` stored in [begin_ms, end_ms]: the
        newest min(max_results, query_results_max), in position order (the search order of
        `IndexService.query`: files newest first, stopping after one older than begin_ms)."""
        if max_results < 1:
            raise ValueError(f"max_results={max_results} must be at least 1")
        return search_files(self._files(), topic=topic, key=key, begin_ms=begin_ms,
                            end_ms=end_ms, results_max=min(max_results, self.query_results_max),
                            key_matches=key_matches, index_type=index_type)

    def _files(self) -> list[IndexFile]:
        """A fresh header view of every index file present now, oldest first."""
        try:
            names = sorted(name for name in os.listdir(self.directory)
                           if parse_index_file_name(name) is not None)
        except FileNotFoundError:
            names = []
        for gone in set(self._mapped) - set(names):
            fd, mapping = self._mapped.pop(gone)
            mapping.close()
            os.close(fd)
        views = []
        for name in names:
            mapped = self._mapped.get(name) or self._map(name)
            if mapped is not None:
                # The view only reads: it is never closed, the mapping stays ours.
                views.append(IndexFile(path=self.directory / name, fd=mapped[0],
                                       mapping=mapped[1], hash_slot_count=self.hash_slot_count,
                                       index_count_max=self.index_count_max))
        return views

    def _map(self, name: str) -> tuple[int, mmap.mmap] | None:
        try:
            fd = os.open(self.directory / name, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            if os.fstat(fd).st_size != self._size_bytes:
                raise IndexFileFormatError(
                    f"{self.directory / name}: {os.fstat(fd).st_size} bytes, but "
                    f"index_hash_slot_count and index_count_max make {self._size_bytes}; "
                    f"use the indexer's settings")
            mapping = mmap.mmap(fd, self._size_bytes, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(fd)
            raise
        self._mapped[name] = (fd, mapping)
        return fd, mapping

    @property
    def file_count(self) -> int:
        return len(self._mapped)

    def close(self) -> None:
        for fd, mapping in self._mapped.values():
            mapping.close()
            os.close(fd)
        self._mapped.clear()
