"""The whole-store tests' own readers of a store directory, written from RocketMQ's layout
(not from mqstore's code, so they can judge it): file listings, consume queue bytes, index
files, the checkpoint, and where RocketMQ's recovery started (which it only logs).
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

SIDE_DIRECTORIES = ("commitlog", "consumequeue", "index")
"""What both stores load at startup; RocketMQ refuses a store with a file there it cannot use."""

CHECKPOINT_FIELDS = struct.Struct(">qqqqqq")
CHECKPOINT_NAMES = ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp",
                    "master_flushed_offset", "confirm_phy_offset", "logics_physical_offset")
"""RocketMQ 5.5's StoreCheckpoint: 4.9.x writes the first three (bytes 0-23), 5.x up to
confirmPhyOffset at 32 and (5.5) logicsPhysicalOffset at 40."""

INDEX_HEADER = struct.Struct(">qqqqii")
INDEX_ENTRY = struct.Struct(">iqii")
CQ_ENTRY = struct.Struct(">qiq")


def listing(directory: Path) -> dict[str, int]:
    """Every file under commitlog/, consumequeue/ and index/: relative path -> size."""
    files = {}
    for side in SIDE_DIRECTORIES:
        root = directory / side
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                if path.is_file():
                    files[str(path.relative_to(directory))] = path.stat().st_size
    return files


def all_zero(path: Path) -> bool:
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            if chunk.count(0) != len(chunk):
                return False
    return True


def read_checkpoint(directory: Path) -> dict[str, int]:
    page = (directory / "checkpoint").read_bytes()
    return dict(zip(CHECKPOINT_NAMES, CHECKPOINT_FIELDS.unpack_from(page, 0), strict=True))


# --------------------------------------------------------------------------- consume queues


def consume_queue_files(directory: Path) -> dict[str, bytes]:
    """consumequeue/<topic>/<queue id>/<file>: relative path -> bytes."""
    root = directory / "consumequeue"
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()}


def first_difference(ours: bytes, theirs: bytes) -> str:
    """Where two consume queue files first differ, as entries (physical offset, size, tags
    code), so a failure names the message."""
    for position in range(0, max(len(ours), len(theirs)), CQ_ENTRY.size):
        a = ours[position:position + CQ_ENTRY.size]
        b = theirs[position:position + CQ_ENTRY.size]
        if a != b:
            def entry(raw: bytes) -> object:
                return CQ_ENTRY.unpack(raw) if len(raw) == CQ_ENTRY.size else raw
            return f"entry {position // CQ_ENTRY.size}: {entry(a)} != {entry(b)}"
    return "identical"


# --------------------------------------------------------------------------- index files


@dataclass(frozen=True)
class IndexFile:
    """One index file, without its name (the creation time, which differs between stores)."""

    name: str
    begin_timestamp: int
    end_timestamp: int
    begin_physical_offset: int
    end_physical_offset: int
    hash_slot_count: int
    index_count: int
    slots: bytes
    entries: tuple[tuple[int, int, int, int], ...]
    """Entries 1 .. index_count-1: (key hash, physical offset, time diff s, previous entry)."""

    @property
    def header(self) -> tuple[int, int, int, int, int, int]:
        return (self.begin_timestamp, self.end_timestamp, self.begin_physical_offset,
                self.end_physical_offset, self.hash_slot_count, self.index_count)


def index_files(directory: Path, *, hash_slots: int) -> list[IndexFile]:
    files = []
    for path in sorted((directory / "index").iterdir()):
        data = path.read_bytes()
        header = INDEX_HEADER.unpack_from(data, 0)
        index_count = header[5]
        entries_at = INDEX_HEADER.size + hash_slots * 4
        entries = tuple(INDEX_ENTRY.unpack_from(data, entries_at + n * INDEX_ENTRY.size)
                        for n in range(1, max(index_count, 1)))
        files.append(IndexFile(path.name, *header,
                               slots=data[INDEX_HEADER.size:entries_at], entries=entries))
    return files


def file_digests(directory: Path) -> dict[str, str]:
    """sha256 of every file under commitlog/, consumequeue/ and index/: relative path -> hex."""
    return {path: hashlib.sha256((directory / path).read_bytes()).hexdigest()
            for path in listing(directory)}


def index_file_bytes(directory: Path) -> list[bytes]:
    """The bytes of each index file in name (= creation) order, without the names (each
    store names a file by the millisecond it created it)."""
    return [path.read_bytes() for path in sorted((directory / "index").iterdir())]


def entries_by_offset(files: list[IndexFile]) -> dict[int, list[int]]:
    """Physical offset -> the key hashes indexed for it, over all files (duplicates kept)."""
    found: dict[int, list[int]] = {}
    for file in files:
        for key_hash, offset, _, _ in file.entries:
            found.setdefault(offset, []).append(key_hash)
    return found


Entry = tuple[int, int]
"""(key hash, physical offset): an index entry as a lookup sees it."""


def entry_list(files: list[IndexFile]) -> list[Entry]:
    """Every entry of the files, oldest file first, in entry order."""
    return [(key_hash, offset) for file in files for key_hash, offset, _, _ in file.entries]


def tag_entries(messages: list[tuple[str, str | None, int]]) -> Counter[Entry]:
    """The entries RocketMQ 5 adds for tags: topic#T#<TAGS> for each (topic, tags, offset)
    with non-empty tags."""
    return Counter((index_key_hash(f"{topic}#T#{tags}"), offset)
                   for topic, tags, offset in messages if tags)


def without(entries: list[Entry], removable: Counter[Entry]) -> list[Entry]:
    """`entries` less one occurrence of each entry in `removable` (order kept)."""
    left = Counter(removable)
    kept = []
    for entry in entries:
        if left[entry] > 0:
            left[entry] -= 1
        else:
            kept.append(entry)
    return kept


def java_string_hash(text: str) -> int:
    """String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def index_key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod: abs(hashCode), with abs(MIN_VALUE) mapped to 0."""
    value = java_string_hash(key)
    return 0 if value == -(1 << 31) else abs(value)


# --------------------------------------------------------------------------- RocketMQ's log


@dataclass(frozen=True)
class Recovery:
    normal: bool
    """RocketMQ found no abort file ("last shutdown normally")."""
    start_file: str
    """The commit log file its recovery started checking (and, if abnormal, dispatching) at."""


_SHUTDOWN = re.compile(r"last shutdown (normally|abnormally)")
_START = re.compile(r"recover from this mapped file (\S+)")
_NEXT = re.compile(r"recover next physics file, (\S+)")
_END = re.compile(r"recover (?:last 3 )?physics file (?:end|over), (?:last mapped file )?(\S+)")


def recovery_from_log(log: str, commit_log_files: list[str]) -> Recovery:
    """Where CommitLog.recoverNormally/recoverAbnormally started, from RocketMQ's INFO log:
    an abnormal recovery names its first file when the checkpoint matched one; otherwise the
    start is the file before the first "recover next physics file", or, when recovery never
    moved on, the file it ended in."""
    shutdown = _SHUTDOWN.search(log)
    assert shutdown, "RocketMQ logged no 'last shutdown' line"
    normal = shutdown.group(1) == "normally"
    if (start := _START.search(log)) is not None:
        return Recovery(normal, Path(start.group(1)).name)
    if (following := _NEXT.search(log)) is not None:
        position = commit_log_files.index(Path(following.group(1)).name)
        return Recovery(normal, commit_log_files[position - 1])
    end = _END.search(log)
    assert end, "RocketMQ logged neither where its commit log recovery went nor where it ended"
    return Recovery(normal, Path(end.group(1)).name)
