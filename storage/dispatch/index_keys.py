"""What dispatch files a record under in the index: its place and keys (RocketMQ
`buildIndex`), from the properties the record walk decoded."""

from __future__ import annotations

from ..files.index_put import IndexedMessage
from ..format.dispatch_scan import DispatchRecord
from ..format.properties import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQUE_KEY
from ..index.index_service import message_index_keys


def indexed_message(head: DispatchRecord, *, index_tags: bool) -> IndexedMessage:
    """The record's physical offset, store time and index keys: `topic#UNIQ_KEY`, `topic#k`
    for each of its KEYS, and `topic#T#<tags>` when `index_tags` (none for a record without
    properties)."""
    properties = head.properties
    tags = properties.get(PROPERTY_TAGS) if index_tags else None
    keys = properties.get(PROPERTY_KEYS)
    return head.physical_offset, head.store_timestamp_ms, message_index_keys(
        topic=head.topic, keys=keys.split(KEY_SEPARATOR) if keys else (),
        unique_key=properties.get(PROPERTY_UNIQUE_KEY), tags=tags or None)
