"""Bulk decoding: the records at known starts of one segment, to one Arrow record batch.

The record layout is storage/format/record.py's (`RECORD_FIELDS`, one `RecordLayout` per host family
and version); this module reads the same fields at the layout's own offsets, for a whole batch
of records at once: each fixed head is gathered into a (records × head size) byte matrix and
every field is a column slice of it.  Records are grouped by layout (almost always one: IPv4
hosts, v1).  Every record is checked as `record.check_record` does (PHYSICALOFFSET names its
position, the lengths add up to TOTALSIZE, optionally the body CRC), so a bad record is reported
with its offset, never decoded into garbage.
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import numpy.typing as npt

from mqstore.storage.format import record
from mqstore.storage.format.message import format_host

from .walk import Corruption

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

_WIDTHS = {"i": 4, "q": 8}
_BORN_V6 = int(record.SysFlag.BORN_HOST_V6)
_STORE_V6 = int(record.SysFlag.STORE_HOST_V6)


@dataclasses.dataclass
class Heads:
    """The fixed fields of n records (one numpy array each) plus where their parts lie."""

    starts: Ints
    total_size: Ints
    body_crc: Ints
    queue_id: Ints
    flag: Ints
    queue_offset: Ints
    physical_offset: Ints
    sysflag: Ints
    born_timestamp_ms: Ints
    store_timestamp_ms: Ints
    body_start: Ints
    body_size: Ints
    topic_start: Ints
    topic_size: Ints
    properties_start: Ints
    properties_size: Ints
    born_host: Ints
    """Index into `HostTable.texts`."""
    store_host: Ints
    problems: dict[int, str]
    """Record index → why it is corrupt (the good records are not in it)."""

    def take(self, chosen: Ints) -> Heads:
        fields = {field.name: getattr(self, field.name)
                  for field in dataclasses.fields(self) if field.name != "problems"}
        taken = {name: value[chosen] for name, value in fields.items()}
        if not self.problems:
            return Heads(**taken, problems={})
        renumbered = {new: self.problems[old] for new, old in enumerate(chosen.tolist())
                      if old in self.problems}
        return Heads(**taken, problems=renumbered)


class HostTable:
    """Distinct hosts of a read, formatted once: "ip:port" and the msg id prefix (hex)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.msg_id_prefixes: list[str] = []
        self._index: dict[bytes, int] = {}

    def indices(self, packed: npt.NDArray[np.uint8]) -> Ints:
        """Row i of `packed` is address + big-endian int32 port; returns each row's index."""
        width = packed.shape[1]
        rows = np.ascontiguousarray(packed).view(np.dtype((np.void, width))).ravel()
        unique, inverse = np.unique(rows, return_inverse=True)
        mapped = np.empty(len(unique), dtype=np.int64)
        for position, value in enumerate(unique.tolist()):
            key = bytes(value)
            index = self._index.get(key)
            if index is None:
                index = self._index[key] = len(self.texts)
                port = int.from_bytes(key[-4:], "big", signed=True)
                self.texts.append(format_host((key[:-4], port)))
                self.msg_id_prefixes.append(key.hex().upper())
            mapped[position] = index
        return mapped[inverse.ravel()]


def _field(matrix: npt.NDArray[np.uint8], offset: int, code: str) -> Ints:
    width = _WIDTHS[code]
    raw = np.ascontiguousarray(matrix[:, offset:offset + width])
    return raw.view(f">i{width}").ravel().astype(np.int64)


def _be_int(data: npt.NDArray[np.uint8], at: Ints, width: int) -> Ints:
    at = np.clip(at, 0, len(data) - width)
    value = np.zeros(len(at), dtype=np.int64)
    for index in range(width):
        value = (value << 8) | data[at + index]
    return value


def decode_heads(data: npt.NDArray[np.uint8], starts: Ints, *, base: int,
                 hosts: HostTable) -> Heads:
    """Decode the fixed heads of the records at `starts` (relative to the segment at `base`)
    and locate their bodies, topics and properties; check them as `check_record` does."""
    count = len(starts)
    sysflag = _be_int(data, starts + 36, 4)
    magic = _be_int(data, starts + 4, 4)
    kinds = ((sysflag & _BORN_V6) != 0) * 4 + ((sysflag & _STORE_V6) != 0) * 2 \
        + (magic == (record.MAGIC_V2 & 0xFFFFFFFF))
    columns = {name: np.zeros(count, dtype=np.int64) for name in (
        "total_size", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
        "born_timestamp_ms", "store_timestamp_ms", "body_size", "head_size",
        "topic_length_size", "born_host", "store_host")}
    for kind in np.unique(kinds).tolist():
        chosen = np.flatnonzero(kinds == kind)
        layout = record.LAYOUTS[bool(kind & 4), bool(kind & 2), bool(kind & 1)]
        _decode_layout(data, starts[chosen], layout, chosen, columns, hosts)
    body_start = starts + columns["head_size"]
    topic_length_at = body_start + columns["body_size"]
    topic_size = np.where(columns["topic_length_size"] == 2,
                          _be_int(data, topic_length_at, 2), _be_int(data, topic_length_at, 1))
    topic_start = topic_length_at + columns["topic_length_size"]
    properties_size = _be_int(data, topic_start + topic_size, 2)
    heads = Heads(starts=starts, sysflag=sysflag - ((sysflag & 0x80000000) << 1),
                  body_start=body_start, topic_start=topic_start, topic_size=topic_size,
                  properties_start=topic_start + topic_size + 2,
                  properties_size=properties_size, problems={},
                  **{name: columns[name] for name in (
                      "total_size", "body_crc", "queue_id", "flag", "queue_offset",
                      "physical_offset", "born_timestamp_ms", "store_timestamp_ms",
                      "body_size", "born_host", "store_host")})
    _check_structure(heads, base=base, data_size=len(data))
    return heads


def _decode_layout(data: npt.NDArray[np.uint8], starts: Ints, layout: record.RecordLayout,
                   chosen: Ints, columns: dict[str, Ints], hosts: HostTable) -> None:
    head_size = layout.head.size
    safe = np.clip(starts, 0, max(len(data) - head_size, 0))
    matrix = data[safe[:, None] + np.arange(head_size)]
    for field in record.RECORD_FIELDS:
        offset = layout.offsets[field.name]
        if field.kind in _WIDTHS:
            if field.name in columns:
                columns[field.name][chosen] = _field(matrix, offset, field.kind)
        elif field.kind == "host":
            width = (20 if (layout.born_v6 if field.name == "born_host" else layout.store_v6)
                     else 8)
            columns[field.name][chosen] = hosts.indices(matrix[:, offset:offset + width])
        elif field.name == "body":
            columns["body_size"][chosen] = _field(matrix, offset, "i")
    columns["head_size"][chosen] = head_size
    columns["topic_length_size"][chosen] = layout.topic_length.size


def _check_structure(heads: Heads, *, base: int, data_size: int) -> None:
    ends = heads.starts + heads.total_size
    problems = heads.problems
    wrong_position = heads.physical_offset != base + heads.starts
    overrun = (heads.body_size < 0) | (heads.body_start > ends) \
        | (heads.topic_start + heads.topic_size + 2 > ends) | (ends > data_size)
    wrong_size = heads.properties_start + heads.properties_size != ends
    for index in np.flatnonzero(wrong_position | overrun | wrong_size).tolist():
        if wrong_position[index]:
            problems[index] = (f"PHYSICALOFFSET field says {heads.physical_offset[index]}, "
                               f"record is at {base + heads.starts[index]}")
        elif overrun[index]:
            problems[index] = (f"BODYLEN {heads.body_size[index]} or TOPICLEN overruns "
                               f"TOTALSIZE {heads.total_size[index]}")
        else:
            recomputed = heads.properties_start[index] + heads.properties_size[index] \
                - heads.starts[index]
            problems[index] = (f"TOTALSIZE {heads.total_size[index]} but the lengths add up "
                               f"to {recomputed}")


def check_crcs(heads: Heads, view: memoryview) -> None:
    """Mark records whose body CRC does not match (one zlib.crc32 per body)."""
    starts, ends = heads.body_start.tolist(), (heads.body_start + heads.body_size).tolist()
    stored = heads.body_crc.tolist()
    for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
        if index in heads.problems:
            continue
        crc = zlib.crc32(view[start:end]) & 0x7FFFFFFF
        if crc != stored[index]:
            heads.problems[index] = f"body CRC 0x{crc:08X} != stored 0x{stored[index]:08X}"


def corruptions(heads: Heads, *, base: int) -> tuple[list[Corruption], Mask]:
    """The corrupt records as (offset, reason), and the mask of the good ones."""
    good = np.ones(len(heads.starts), dtype=bool)
    good[list(heads.problems)] = False
    found = [Corruption(base + int(heads.starts[i]), heads.problems[i])
             for i in sorted(heads.problems)]
    return found, good
