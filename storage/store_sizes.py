"""The sizes a store directory fixes, read from its files; and the embedded profile.

A store's files fix their own sizes: every commit log segment is `segment_size_bytes` long,
every consume queue file `consume_queue_file_size_bytes`, every index file
40 + 4 × `index_hash_slot_count` + 20 × `index_count_max` bytes (RocketMQ loads no other
lengths, and neither does the engine).  A tool that opens a store it did not make (a Spark
job, `mqstore produce` on an existing directory, `MessageStore.open` without a config)
reads them here instead of assuming its own defaults.

An index file's length does not say how it splits into slots and entries, nor does its
header (which counts the slots used, not the slots).  The geometries the project's own
profiles write are known (`index_geometries`): a file of one of their lengths is read as
that geometry, and a file of any other length needs the two counts given.  Sizes no file
fixes yet (a store with segments but no consume queue or index file) come from the profile
its segment size points at (`profile_fields`).

The embedded profile is what `MessageStore.open(directory)` without a config, and
`mqstore produce DIR`, make for a new store: a server's defaults (1 GiB segments, prepared
one ahead, and a 420 MB index file) cost 2.5 GB of disk and about 11 s before three messages
on a laptop.  The profile keeps RocketMQ's file formats and every safety property (full
length files, preallocated blocks, synced before named) and only makes them smaller:

    commit log segment      64 MiB (two of them prepared: 128 MiB)
    consume queue file      RocketMQ's 6,000,000 bytes (64 KiB of blocks reserved at first)
    index file              250,000 slots × 1,000,000 entries: 21,000,040 bytes
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from .config import GIB, MIB, StoreConfig
from .files.index_file import index_file_size_bytes
from .format.volume import (
    COMMITLOG_DIRECTORY,
    CONSUME_QUEUE_DIRECTORY,
    INDEX_DIRECTORY,
    parse_index_file_name,
    parse_offset_file_name,
)

EMBEDDED_SEGMENT_SIZE_BYTES = 64 * MIB
"""64 MiB: a laptop's demo of 100,000 messages of 1 KiB fills two, the two prepared cost
128 MiB of disk and ~60 ms of preparation (populate at ~0.45 s/GiB, files/preallocate.py),
and a 4 MiB body (RocketMQ's `maxMessageSize`) still fits sixteen times."""

EMBEDDED_FIELDS: dict[str, object] = {
    "segment_size_bytes": EMBEDDED_SEGMENT_SIZE_BYTES,
    "message_body_size_bytes_max": 4 * MIB,
    "consume_queue_file_size_bytes": 6_000_000,
    "index_hash_slot_count": 250_000,
    "index_count_max": 1_000_000,
}
"""The embedded profile's sizes (module docstring); every other field keeps its default."""


class IndexGeometry(NamedTuple):
    hash_slot_count: int
    index_count_max: int

    @property
    def size_bytes(self) -> int:
        return index_file_size_bytes(hash_slot_count=self.hash_slot_count,
                                     index_count_max=self.index_count_max)


def index_geometries() -> tuple[IndexGeometry, ...]:
    """The index geometries the project's profiles write: the server's defaults, the
    embedded profile, and `StoreConfig.for_small_segments` (tests)."""
    configs = (StoreConfig(), embedded_config(None), StoreConfig.for_small_segments(MIB))
    return tuple(IndexGeometry(config.index_hash_slot_count, config.index_count_max)
                 for config in configs)


def detected_sizes(directory: Path, *, index_hash_slot_count: int | None = None,
                   index_count_max: int | None = None) -> dict[str, int]:
    """The `StoreConfig` size fields the directory's files fix, by field name: those of
    files it has (none for a new directory).  Index counts, when given (a store made with
    counts no profile uses), are tried first: both must make the files' length; one alone
    is completed by the length (40 + 4 × slots + 20 × entries)."""
    found: dict[str, int] = {}
    segment = _first_file(directory / COMMITLOG_DIRECTORY)
    if segment is not None:
        found["segment_size_bytes"] = segment.stat().st_size
    queue_file = _first_queue_file(directory / CONSUME_QUEUE_DIRECTORY)
    if queue_file is not None:
        found["consume_queue_file_size_bytes"] = queue_file.stat().st_size
    size_bytes = index_file_length(directory)
    if size_bytes is not None:
        given = _given_geometry(size_bytes, hash_slot_count=index_hash_slot_count,
                                index_count_max=index_count_max)
        for geometry in (*([given] if given else []), *index_geometries()):
            if geometry.size_bytes == size_bytes:
                found["index_hash_slot_count"] = geometry.hash_slot_count
                found["index_count_max"] = geometry.index_count_max
                break
    return found


def _given_geometry(size_bytes: int, *, hash_slot_count: int | None,
                    index_count_max: int | None) -> IndexGeometry | None:
    """The geometry of the counts given, one of them completed from `size_bytes`."""
    header_bytes = index_file_size_bytes(hash_slot_count=0, index_count_max=0)
    if hash_slot_count is not None and index_count_max is None:
        entries_bytes = size_bytes - header_bytes - 4 * hash_slot_count
        index_count_max = entries_bytes // 20 if entries_bytes > 0 else None
    elif index_count_max is not None and hash_slot_count is None:
        slots_bytes = size_bytes - header_bytes - 20 * index_count_max
        hash_slot_count = slots_bytes // 4 if slots_bytes > 0 else None
    if hash_slot_count is None or index_count_max is None:
        return None
    return IndexGeometry(hash_slot_count, index_count_max)


def index_file_length(directory: Path) -> int | None:
    """The length of the directory's first index file, None without one."""
    index_file = _first_file(directory / INDEX_DIRECTORY, index=True)
    return index_file.stat().st_size if index_file is not None else None


def embedded_config(directory: Path | None, **overrides: object) -> StoreConfig:
    """The embedded profile with `overrides`, then the sizes `directory`'s files fix (they
    win: a store's sizes are set when its first files are made).  A segment of 1 GiB or
    more is configured as a server's; a smaller one scales the other size maxima down with
    it (`StoreConfig.for_small_segments`)."""
    detected = detected_sizes(directory) if directory is not None else {}
    return config_with_sizes({**profile_fields(detected), **overrides, **detected})


def profile_fields(detected: dict[str, int]) -> dict[str, object]:
    """The fields of the profile a store was most likely made with, for the sizes its
    files do not fix yet (a store with segments but no queue or index file): the
    embedded profile for a new store or one of its segment size; otherwise none, so that
    a server's store (1 GiB) gets the defaults and a test's small one their scaled-down
    sizes (`config_with_sizes`)."""
    segment_size_bytes = detected.get("segment_size_bytes")
    if segment_size_bytes is None or segment_size_bytes == EMBEDDED_SEGMENT_SIZE_BYTES:
        return dict(EMBEDDED_FIELDS)
    return {}


def config_with_sizes(fields: dict[str, object]) -> StoreConfig:
    """A `StoreConfig` of `fields`: below a 1 GiB segment, the size maxima not given are
    scaled down with it (a body of a quarter segment at most)."""
    segment_size_bytes = fields.get("segment_size_bytes", GIB)
    if isinstance(segment_size_bytes, int) and segment_size_bytes < GIB:
        rest = {key: value for key, value in fields.items() if key != "segment_size_bytes"}
        body_max = rest.get("message_body_size_bytes_max")
        if isinstance(body_max, int):
            rest["message_body_size_bytes_max"] = min(body_max, segment_size_bytes // 4)
        return StoreConfig.for_small_segments(segment_size_bytes, **rest)
    return StoreConfig(**fields)  # type: ignore[arg-type]


def _first_file(folder: Path, *, index: bool = False) -> Path | None:
    """The first (by name) segment or index file in `folder`, if any."""
    if not folder.is_dir():
        return None
    parse = parse_index_file_name if index else parse_offset_file_name
    names = sorted(name for name in os.listdir(folder) if parse(name) is not None)
    return folder / names[0] if names else None


def _first_queue_file(queues: Path) -> Path | None:
    if not queues.is_dir():
        return None
    for topic in sorted(queues.iterdir()):
        for queue in sorted(topic.iterdir()) if topic.is_dir() else []:
            found = _first_file(queue)
            if found is not None:
                return found
    return None
