"""The volume's path names: every file and directory mqstore keeps under a store directory,
and how the numbered ones are named.  Names only; nothing here touches a file.

    <store>/commitlog/<20-digit start position>            commit log segments
    <store>/consumequeue/<topic>/<queue id>/<20 digits>    consume queue files
    <store>/index/<yyyyMMddHHmmssSSS>                       index files
    <store>/checkpoint                                      synced watermarks (RocketMQ layout)
    <store>/queue-offsets                                   the writer's queue offsets
    <store>/lock, abort                                     the writer's lock, unclean marker
    <store>/positions                                       the writer's published watermarks
    <store>/dispatched                                      the indexer's published positions
    <store>/indexer.lock, indexer.abort, indexer-checkpoint the indexer process's own
    <store>/config/consumer-offsets/<group>.json            consumer group offsets
    <store>/creating/<kind>.<...>                            files being prepared
    <store>/creating/consumequeue.<topic digest>.<queue id>.<20 digits>

A segment, consume queue or index file appears under its final name only at full size and
synced: it is prepared in `creating/` (so nothing but finished files is ever in `commitlog/`,
`consumequeue/` or `index/`, where RocketMQ's loaders refuse anything else), then renamed
into place and the directory synced.  A crash in between leaves only a file in `creating/`,
which its owner removes at its next open (the writer its `commitlog.*`, the indexer its
`consumequeue.*` and `index.*`: the two may prepare files at the same time).
"""

from __future__ import annotations

import datetime
import hashlib
from pathlib import PurePath

COMMITLOG_DIRECTORY = "commitlog"
CONSUME_QUEUE_DIRECTORY = "consumequeue"
INDEX_DIRECTORY = "index"
CHECKPOINT_FILE = "checkpoint"
QUEUE_OFFSETS_FILE = "queue-offsets"
LOCK_FILE = "lock"
ABORT_FILE = "abort"
POSITIONS_FILE = "positions"
DISPATCHED_FILE = "dispatched"
INDEXER_LOCK_FILE = "indexer.lock"
INDEXER_ABORT_FILE = "indexer.abort"
INDEXER_CHECKPOINT_FILE = "indexer-checkpoint"
OFFSETS_DIRECTORY = PurePath("config") / "consumer-offsets"

CREATING_DIRECTORY = "creating"
CREATING_SUFFIX = ".creating"
"""A small file being rewritten (group offsets, watermarks): renamed over the old one."""
CREATING_SEPARATOR = "."
"""Joins the parts of a name in `creating/`: no topic name holds a dot."""


def creating_name(kind: str, *parts: str) -> str:
    """The name in `creating/` of a `kind` file ("commitlog", "consumequeue", "index")."""
    return CREATING_SEPARATOR.join((kind, *parts))


NAME_SIZE_BYTES_MAX = 255
"""A name in a directory (Linux NAME_MAX): `consumequeue/<topic>/` fits a topic of 255 bytes,
RocketMQ 5's longest, and a name in `creating/` must fit whatever the topic."""
TOPIC_DIGEST_HEX_DIGITS = 16


def consume_queue_creating_name(topic: str, queue_id: int, start_position: int) -> str:
    """The name in `creating/` of a consume queue file of `topic`: the topic by a digest of its
    name (64 bits, in hex), so the name has the same length whatever the topic; the queue and
    the start position keep it readable.  Only one file is prepared at a time per queue and
    a leftover is deleted at the next open, so a digest collision cannot harm a file."""
    digest = hashlib.blake2b(topic.encode("utf-8"),
                             digest_size=TOPIC_DIGEST_HEX_DIGITS // 2).hexdigest()
    name = creating_name(CONSUME_QUEUE_DIRECTORY, digest, str(queue_id),
                         offset_file_name(start_position))
    assert len(name.encode("ascii")) <= NAME_SIZE_BYTES_MAX
    return name

# -- numbered by position: segments and consume queue files ---------------------------------
FILE_NAME_DIGITS = 20


def offset_file_name(start_position: int) -> str:
    """The name of the segment or consume queue file whose first byte is `start_position`."""
    assert start_position >= 0
    return f"{start_position:0{FILE_NAME_DIGITS}d}"


def parse_offset_file_name(name: str) -> int | None:
    """The start position a file name encodes, or None if it is not such a name."""
    if len(name) != FILE_NAME_DIGITS or not name.isdigit() or not name.isascii():
        return None
    return int(name)


def parse_queue_id(name: str) -> int | None:
    """The queue id a `consumequeue/<topic>/<name>` directory names, or None (RocketMQ
    skips directories whose names are not integers)."""
    return int(name) if name.isascii() and name.isdigit() else None


# -- numbered by time: index files -----------------------------------------------------------
INDEX_FILE_NAME_DIGITS = 17
"""RocketMQ's `yyyyMMddHHmmssSSS` in local time (`UtilAll.timeMillisToHumanString`), kept
strictly increasing by the index service."""


def index_file_name(created_ms: int) -> str:
    """`UtilAll.timeMillisToHumanString`: the local time of `created_ms`, 17 digits."""
    assert created_ms >= 0
    created = datetime.datetime.fromtimestamp(created_ms // 1000)
    return _format_index_name(created.replace(microsecond=created_ms % 1000 * 1000))


def parse_index_file_name(name: str) -> datetime.datetime | None:
    """The (naive, local) creation time a file name encodes, or None if it is not one."""
    if len(name) != INDEX_FILE_NAME_DIGITS or not name.isascii() or not name.isdigit():
        return None
    try:
        created = datetime.datetime.strptime(name[:14], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    return created.replace(microsecond=int(name[14:]) * 1000)


def index_file_name_after(name: str) -> str:
    """The name one millisecond later than `name` (for two files created in the same
    millisecond, or a clock that stepped back)."""
    created = parse_index_file_name(name)
    assert created is not None, f"not an index file name: {name!r}"
    return _format_index_name(created + datetime.timedelta(milliseconds=1))


def _format_index_name(created: datetime.datetime) -> str:
    name = (f"{created.year:04d}{created.month:02d}{created.day:02d}{created.hour:02d}"
            f"{created.minute:02d}{created.second:02d}{created.microsecond // 1000:03d}")
    assert len(name) == INDEX_FILE_NAME_DIGITS
    return name
