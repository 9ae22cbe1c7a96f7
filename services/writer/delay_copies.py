"""Copies the delay schedule delivered after its last saved progress: found again after a
crash, so a restart does not deliver them twice.

The schedule saves its progress (config/delayOffset.json) only as far as the copies it
delivered are flushed, with the log position every later copy starts at or after
(`mqstoreDeliveryScanPosition`).  A crash loses the progress made since, not the copies, so
at start the writer reads the log from that position to its end and counts each delivered
copy there by identity; the schedule then recognises the entries those copies came from and
steps past them instead of putting them again.

A copy is a record outside `SCHEDULE_TOPIC_XXXX` whose `REAL_TOPIC` names its own topic and
which carries `DELAY` (the schedule keeps both, as RocketMQ's does; a producer's send never
names its own topic in `REAL_TOPIC`).  Its identity is (topic, queue id, born time,
UNIQ_KEY, body CRC): what the schedule record it came from has too, and shared only by a
producer's identical resends of one message.  A file RocketMQ wrote has no scan position:
what RocketMQ delivered since its last save comes again, as RocketMQ would deliver it.
"""

from __future__ import annotations

import collections

from mqstore.storage import MessageStore
from mqstore.storage.format.delay_levels import (
    PROPERTY_DELAY,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    SCHEDULE_TOPIC,
)
from mqstore.storage.format.message import StoredMessage
from mqstore.storage.format.properties import PROPERTY_UNIQUE_KEY

Identity = tuple[str, int, int, str, int]


def identity_of(stored: StoredMessage, topic: str, queue_id: int) -> Identity:
    """The identity of the copy of `stored` put into `topic`/`queue_id`."""
    return (topic, queue_id, stored.born_timestamp_ms,
            stored.properties.get(PROPERTY_UNIQUE_KEY, ""), stored.body_crc)


def delivered_since(store: MessageStore,
                    scan_position: int | None) -> collections.Counter[Identity]:
    """The copies in the log from `scan_position` to its end (none when it is None)."""
    copies: collections.Counter[Identity] = collections.Counter()
    if scan_position is None:
        return copies
    for message in store.iter_messages(max(scan_position, store.min_position)):
        properties = message.properties
        if message.topic != SCHEDULE_TOPIC and PROPERTY_DELAY in properties and \
                properties.get(PROPERTY_REAL_TOPIC) == message.topic and \
                properties.get(PROPERTY_REAL_QUEUE_ID) == str(message.queue_id):
            copies[identity_of(message, message.topic, message.queue_id)] += 1
    return copies
