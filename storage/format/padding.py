"""Group-commit padding: the filler record that ends a sync group on an alignment boundary.

The race design this follows (the 2021 Tianchi race) pads every group write to the next
4 KiB before its fdatasync, so that a sync never leaves a half-written page that the next
sync writes again.  With `group_commit_align_bytes` set, the group commit does the same:
before each sync, under the put lock, the commit log appends one filler record that ends
exactly on the next boundary.

The filler is a valid RocketMQ record (v1, the store's host as born and store host):

    topic       rmq_sys_mqstore_padding   (RocketMQ reserves the `rmq_sys_` prefix for
                                           system topics; producers may not use this one)
    queue id    0          queue offset 0          flag 0, no properties
    body        zero bytes, as many as make TOTALSIZE fill the gap
    size        91 B fixed (+12 per IPv6 host) + 23 B topic + body: 114 B at least (IPv4)

Why a record and not a new marker: recovery, dispatch, scrub and RocketMQ's own decoder all
walk the log by TOTALSIZE and all accept a valid record, while a BLANK means "end of segment"
to every one of them.  Who looks past it: dispatch (no consume queue entry, no index entry,
no notice; it compares the topic bytes before decoding properties), recovery's queue offsets
and `iter_messages`.  `mqstore verify` and `inspect` count it as the record it is.

Sizes (`padding_size_bytes`): the gap to the next boundary; if that is smaller than the
smallest filler, the boundary after it.  No filler when it would not leave the 8-byte BLANK
reserve in the segment: the segment's end is a boundary already (alignment divides the
segment size), and the BLANK written at the roll reaches it.
"""

from __future__ import annotations

from . import record

PADDING_TOPIC = "rmq_sys_mqstore_padding"
PADDING_TOPIC_BYTES = PADDING_TOPIC.encode("ascii")


class PaddingEncoder:
    """Encodes fillers for one store host (which fixes the layout and the smallest size)."""

    def __init__(self, store_host: tuple[bytes, int]) -> None:
        v6 = len(store_host[0]) == 16
        self._layout = record.LAYOUTS[v6, v6, False]
        self._store_host = store_host
        self.size_bytes_min = self._layout.record_size(
            body_bytes=0, topic_bytes=len(PADDING_TOPIC_BYTES), properties_bytes=0)
        """TOTALSIZE of a filler with an empty body."""

    def encode(self, *, size_bytes: int, physical_offset: int, store_timestamp_ms: int) -> bytes:
        """A stamped filler of exactly `size_bytes` starting at `physical_offset`."""
        assert size_bytes >= self.size_bytes_min
        encoded = bytearray(record.encode_record(
            layout=self._layout, queue_id=0, flag=0, sysflag=0,
            born_timestamp_ms=store_timestamp_ms, born_host=self._store_host,
            store_host=self._store_host, body=bytes(size_bytes - self.size_bytes_min),
            topic=PADDING_TOPIC_BYTES, properties=b""))
        record.stamp_record(encoded, 0, store_timestamp_offset=self._layout.store_timestamp_offset,
                            queue_offset=0, physical_offset=physical_offset,
                            store_timestamp_ms=store_timestamp_ms)
        assert len(encoded) == size_bytes
        return bytes(encoded)


def padding_size_bytes(*, position: int, room_bytes: int, align_bytes: int,
                       size_bytes_min: int) -> int:
    """Bytes of filler that end a group written up to absolute `position` on a multiple of
    `align_bytes`, with `room_bytes` left in its segment; 0 if aligned or no room."""
    assert align_bytes > 0
    assert room_bytes >= 0
    gap = -position % align_bytes
    if gap == 0:
        return 0
    if gap < size_bytes_min:
        gap += -(-(size_bytes_min - gap) // align_bytes) * align_bytes
    if gap + record.BLANK_SIZE_BYTES > room_bytes:
        return 0
    assert (position + gap) % align_bytes == 0
    return gap
