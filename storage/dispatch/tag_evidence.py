"""Whether a store's index holds tag entries: the index of the RocketMQ version that wrote it.

RocketMQ 5's `IndexService.buildIndex` indexes a message under `topic#UNIQ_KEY`, then
`topic#k` for each KEYS entry, then `topic#T#<TAGS>`; 4.9.x writes the first two only.  Both
write the same file format, and nothing else in a store says which version wrote it (4.9.4
and 5.5 leave the same checkpoint fields zero in a broker without HA), so the index itself is
asked: for the newest messages with TAGS among the newest `ENTRIES_EXAMINED_MAX` entries,
is `topic#T#<TAGS>` indexed at their offset?

With `StoreConfig.index_tags_enabled = None` (the default) a store keeps what its index holds:
a 4.9.x store stays without tag entries, byte for byte what RocketMQ 4.9 itself would write,
and a 5.x store (or one mqstore wrote with tags on) keeps them.  An index without evidence
(a new store, an index whose newest messages carry no TAGS) takes 5.x's behaviour, tags on.
An explicit true/false is always honoured.

Reads only: the index files with plain reads (never mapped writable, so a store another
process holds can be asked, as the reindex job does) and the records at the entries'
offsets through a `CommitLogReader`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from ..config import StoreConfig
from ..files.index_file import index_file_size_bytes
from ..files.index_file import index_key_hash as hash_of_key
from ..files.index_put import HASH_SLOT, INDEX_ENTRY, INDEX_HEADER
from ..format import record
from ..format.properties import PROPERTY_TAGS, decode_properties
from ..format.volume import COMMITLOG_DIRECTORY, INDEX_DIRECTORY, parse_index_file_name
from ..index.index_service import INDEX_TAG_TYPE, index_key
from ..log.reader import CommitLogReader

log = logging.getLogger(__name__)

ENTRIES_EXAMINED_MAX = 256
"""The newest entries read (5 KiB): a message has at most ~5 entries in RocketMQ's corpus
(UNIQ_KEY, three keys, tags), so about 50 messages, enough for `VOTES_MAX` tagged ones even
when most of the newest messages carry no TAGS."""

VOTES_MAX = 8
"""Tagged messages asked.  More than one, so a stray entry cannot decide alone: a 4.9 store
that an older mqstore opened holds one tag entry, for the message at its index's end."""

TopicAndTags = tuple[str, str | None]


def index_tags_for_store(directory: Path, config: StoreConfig, *,
                         reader: CommitLogReader | None = None) -> bool:
    """`config.index_tags_enabled` if given, else what the store's index holds (the module
    docstring), else True (RocketMQ 5's behaviour, for a new store)."""
    if config.index_tags_enabled is not None:
        return config.index_tags_enabled
    own_reader = reader is None
    if reader is None:
        reader = CommitLogReader(directory / COMMITLOG_DIRECTORY,
                                 segment_size_bytes=config.segment_size_bytes)
    try:
        entries = newest_entries(directory / INDEX_DIRECTORY,
                                 hash_slot_count=config.index_hash_slot_count,
                                 index_count_max=config.index_count_max)
        held = tag_entries_held(entries,
                                tags_at=lambda offset: topic_and_tags_at(reader, offset))
    finally:
        if own_reader:
            reader.close()
    if held is None:
        return True
    log.info("%s: the index %s tag entries (topic#T#<tags>); indexing %s", directory,
             "holds" if held else "holds no", "them too" if held else "without them")
    return held


def tag_entries_held(entries: Sequence[tuple[int, int]], *,
                     tags_at: Callable[[int], TopicAndTags | None]) -> bool | None:
    """Whether the newest tagged messages of `entries` ((key hash, physical offset), newest
    first, as `newest_entries` gives them) have their tag entry: the majority of up to
    `VOTES_MAX`, a tie going to the newest; None without a tagged message.  `tags_at(offset)`
    gives the topic and TAGS of the message at a commit log offset, or None if it cannot be
    read (retention deleted it)."""
    hashes_by_offset: dict[int, set[int]] = {}  # newest message first
    for key_hash, physical_offset in entries:
        hashes_by_offset.setdefault(physical_offset, set()).add(key_hash)
    votes: list[bool] = []
    for physical_offset, hashes in hashes_by_offset.items():
        found = tags_at(physical_offset)
        if found is None or not found[1]:
            continue
        topic, tags = found
        assert tags is not None
        tag_key = index_key(topic=topic, key=tags, index_type=INDEX_TAG_TYPE)
        votes.append(hash_of_key(tag_key) in hashes)
        if len(votes) == VOTES_MAX:
            break
    if not votes:
        return None
    held = votes.count(True)
    return votes[0] if 2 * held == len(votes) else 2 * held > len(votes)


def newest_entries(index_directory: Path, *, hash_slot_count: int,
                   index_count_max: int) -> list[tuple[int, int]]:
    """(key hash, physical offset) of the newest `ENTRIES_EXAMINED_MAX` entries, newest
    first, over the newest files (a file of another size than the settings make is passed
    over: `IndexService.load` judges it)."""
    size_bytes = index_file_size_bytes(hash_slot_count=hash_slot_count,
                                       index_count_max=index_count_max)
    if not index_directory.is_dir():
        return []
    paths = sorted(path for path in index_directory.iterdir()
                   if parse_index_file_name(path.name) is not None)
    entries_position = INDEX_HEADER.size + hash_slot_count * HASH_SLOT.size
    entries: list[tuple[int, int]] = []
    for path in reversed(paths):
        if len(entries) >= ENTRIES_EXAMINED_MAX:
            break
        with open(path, "rb") as file:
            if file.seek(0, 2) != size_bytes:
                continue
            file.seek(0)
            index_count = INDEX_HEADER.unpack(file.read(INDEX_HEADER.size))[5]
            index_count = min(max(index_count, 1), index_count_max)
            first = max(1, index_count - (ENTRIES_EXAMINED_MAX - len(entries)))
            file.seek(entries_position + first * INDEX_ENTRY.size)
            data = file.read((index_count - first) * INDEX_ENTRY.size)
        assert len(data) == (index_count - first) * INDEX_ENTRY.size
        for number in reversed(range(index_count - first)):
            key_hash, physical_offset, _, _ = INDEX_ENTRY.unpack_from(
                data, number * INDEX_ENTRY.size)
            entries.append((key_hash, physical_offset))
    assert len(entries) <= ENTRIES_EXAMINED_MAX
    return entries


def topic_and_tags_at(reader: CommitLogReader, physical_offset: int) -> TopicAndTags | None:
    """The topic and TAGS of the whole record at `physical_offset`, or None if no segment
    holds one there (deleted, never written, or not a record: an entry of a torn index)."""
    if physical_offset < 0:
        return None
    segment = reader.find(physical_offset)
    if segment is None or not segment.hold():
        return None
    try:
        position = physical_offset - segment.start_position
        result = record.check_record(segment.mapping, position,
                                     limit=reader.segment_size_bytes,
                                     expected_physical_offset=physical_offset,
                                     verify_crc=False)
        if result.status is not record.RecordCheck.OK:
            return None
        assert result.head is not None
        assert result.layout is not None
        topic_bytes, properties_bytes = record.topic_and_properties(
            segment.mapping, position, result.layout, result.head)
    finally:
        segment.release()
    # As dispatch decodes them (dispatcher.py), so the key is the one dispatch would build.
    return (topic_bytes.decode("ascii", "replace"),
            decode_properties(properties_bytes).get(PROPERTY_TAGS))
