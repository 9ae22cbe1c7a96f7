"""RocketMQ's batch body (`MessageDecoder.encodeMessages`): what a producer's SEND_BATCH_MESSAGE
carries, split into its messages.

Each entry, big-endian, one after another to the body's end:

    +0   TOTALSIZE     int32   the entry's size, these 20 bytes included
    +4   MAGICCODE     int32   (not checked: clients write 0 or RocketMQ's magic)
    +8   BODYCRC       int32   (not checked: the store computes its own)
    +12  FLAG          int32
    +16  BODYLEN       int32
    +20  BODY          BODYLEN bytes
         PROPLEN       int16
         PROPERTIES    PROPLEN bytes, `name 0x01 value 0x02 ...`

The batch's own properties (the request's) follow each entry's, as RocketMQ's broker appends
them, but never one the entry sets itself: a 5.x batch carries a UNIQ_KEY of its own, which
would otherwise replace every entry's (a reader keeps the last value).  4.9.1-5.1.4 clients
omit an entry's last 0x02; it is added back.

`split_batch` is the C twin (storage/format/_records.c) of `split_batch_reference` unless
MQSTORE_NO_EXTENSIONS=1 (storage/format/compiled.py): the writer splits every batch a
RocketMQ producer sends, so this runs once per batched message.
"""

from __future__ import annotations

import struct

from . import compiled

ENTRY_HEAD = struct.Struct(">iiiii")
PROPERTIES_LENGTH = struct.Struct(">h")
PROPERTY_SEPARATOR = b"\x02"
NAME_VALUE_SEPARATOR = b"\x01"

BatchEntry = tuple[bytes, int, bytes]
"""(body, flag, encoded properties with the batch's own appended)."""


class BatchBodyError(ValueError):
    """A batch body that is not whole entries, or holds none, or too many."""


def property_pairs(properties: bytes) -> list[tuple[bytes, bytes]]:
    """(b"NAME\\x01", b"NAME\\x01value\\x02") of each property in an encoded string."""
    pairs = []
    for piece in properties.split(PROPERTY_SEPARATOR):
        name, separator, _ = piece.partition(NAME_VALUE_SEPARATOR)
        if name and separator:
            pairs.append((name + separator, piece + PROPERTY_SEPARATOR))
    return pairs


def split_batch_reference(body: bytes, outer_properties: bytes,
                          entries_max: int) -> list[BatchEntry]:
    """The entries of `body`, each with `outer_properties` (the batch's own) appended;
    raises `BatchBodyError` for a body past `entries_max` entries, one with none, or an entry
    whose sizes do not add up."""
    outer = property_pairs(outer_properties)
    outer_all = b"".join(pair for _, pair in outer)
    entries: list[BatchEntry] = []
    position = 0
    while position < len(body):
        if len(entries) >= entries_max:  # before it is all decoded
            raise BatchBodyError(f"batch holds more than {len(entries)} messages "
                                 f"(batch_messages_max)")
        if position + ENTRY_HEAD.size > len(body):
            raise BatchBodyError(f"batch entry at byte {position}: its 20-byte head runs "
                                 f"past the body")
        total, _, _, flag, body_length = ENTRY_HEAD.unpack_from(body, position)
        body_at = position + ENTRY_HEAD.size
        properties_at = body_at + body_length + PROPERTIES_LENGTH.size
        end = position + total
        if body_length < 0 or total < ENTRY_HEAD.size + 2 or end > len(body) \
                or properties_at > end:
            raise BatchBodyError(f"batch entry at byte {position}: size {total} or body "
                                 f"length {body_length} runs past the batch")
        (properties_length,) = PROPERTIES_LENGTH.unpack_from(body, properties_at - 2)
        if properties_at + properties_length != end:
            raise BatchBodyError(f"batch entry at byte {position}: properties length "
                                 f"{properties_length} does not end the entry")
        inner = body[properties_at:end]
        if inner and not inner.endswith(PROPERTY_SEPARATOR):
            inner += PROPERTY_SEPARATOR
        appended = outer_all
        if any(name in inner for name, _ in outer):
            appended = b"".join(pair for name, pair in outer if not (
                inner.startswith(name) or PROPERTY_SEPARATOR + name in inner))
        entries.append((body[body_at:body_at + body_length], flag, inner + appended))
        position = end
    if not entries:
        raise BatchBodyError("batch body holds no message")
    return entries


split_batch = compiled.pick(split_batch_reference)
