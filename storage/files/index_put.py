"""The index's write loop: keys appended to one index file, RocketMQ `IndexFile.putKey` step
for step (the byte layout is in storage/files/index_file.py's `IndexFile` docstring).

`put_index_keys` is the C twin (storage/format/_records.c) of `put_index_keys_reference`
unless MQSTORE_NO_EXTENSIONS=1 (storage/format/compiled.py): dispatch indexes every
message's unique key, tags and keys, one entry each, so this runs once per key stored.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence

from ..format import compiled
from ..format.java_hash import java_string_hash

INDEX_HEADER = struct.Struct(">qqqqii")
HASH_SLOT = struct.Struct(">i")
INDEX_ENTRY = struct.Struct(">iqii")
INVALID_INDEX = 0
"""Entry number 0 is never written: a slot or a `previous_index` of 0 ends a chain."""
INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)

IndexedMessage = tuple[int, int, Sequence[str]]
"""(physical offset, store time in ms, the keys it is filed under)."""


def put_index_keys_reference(mapping: mmap.mmap | bytearray, entries_position: int,
                             hash_slot_count: int, index_count_max: int, header: list[int],
                             messages: Sequence[IndexedMessage], first: int,
                             key_first: int) -> tuple[int, int]:
    """Append the keys of `messages[first:]` (of the first, from its key `key_first`) to the
    file mapped at `mapping`, while it has room; returns the first key not stored, as
    (message, key), or (len(messages), 0) when every key was.

    `header` holds the file's header fields in `INDEX_HEADER` order (begin and end time,
    begin and end offset, slots used, index count); it is updated in place and written to
    the mapping once, at the end, if anything was stored.  For each key: the entry takes the
    next number, chains to the slot's newest entry (one that is out of range starts a new
    chain), and stores whole seconds since begin (0 while there is no begin time or the
    clock went back, at most INT32_MAX); the slot then names it; the first entry's message
    becomes begin, and every one's becomes end."""
    begin_timestamp_ms, end_timestamp_ms, begin_physical_offset, end_physical_offset, \
        hash_slot_used_count, index = header
    reached = len(messages), 0
    for message in range(first, len(messages)):
        physical_offset, store_timestamp_ms, keys = messages[message]
        for key_number in range(key_first if message == first else 0, len(keys)):
            if index >= index_count_max:
                reached = message, key_number
                break
            key_hash = java_string_hash(keys[key_number])
            key_hash = 0 if key_hash == INT32_MIN else abs(key_hash)
            slot_position = INDEX_HEADER.size + key_hash % hash_slot_count * HASH_SLOT.size
            previous_index = HASH_SLOT.unpack_from(mapping, slot_position)[0]
            if previous_index <= INVALID_INDEX or previous_index > index:
                previous_index = INVALID_INDEX
                hash_slot_used_count += 1
            elapsed_ms = store_timestamp_ms - begin_timestamp_ms
            time_diff_seconds = 0 if begin_timestamp_ms <= 0 or elapsed_ms < 0 else \
                min(elapsed_ms // 1000, INT32_MAX)
            INDEX_ENTRY.pack_into(mapping, entries_position + index * INDEX_ENTRY.size, key_hash,
                                  physical_offset, time_diff_seconds, previous_index)
            HASH_SLOT.pack_into(mapping, slot_position, index)
            if index <= 1:
                begin_physical_offset, begin_timestamp_ms = physical_offset, store_timestamp_ms
            index += 1
            end_physical_offset, end_timestamp_ms = physical_offset, store_timestamp_ms
        else:
            continue
        break
    if index != header[5]:
        header[:] = [begin_timestamp_ms, end_timestamp_ms, begin_physical_offset,
                     end_physical_offset, hash_slot_used_count, index]
        INDEX_HEADER.pack_into(mapping, 0, *header)
    return reached


put_index_keys = compiled.pick(put_index_keys_reference)
