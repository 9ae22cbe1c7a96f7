"""Checking records and decoding their fixed fields, for a whole batch of records at once.

`decode_heads` checks the record at each start as the engine does, with
`record.check_record` (PHYSICALOFFSET names its position, the lengths add up to TOTALSIZE,
optionally the body CRC), so a bad record is reported with its offset and the engine's
reason, never decoded into garbage; it returns every fixed field as one numpy array each,
and where each topic lies.  `decode_heads_reference` is the definition, one
`check_record` per record; `decode_heads` is its C twin in storage/format/_walk.c unless
MQSTORE_NO_EXTENSIONS=1 (compiled_walk.py), which asks `record_problem` for the reason of
every record it does not accept, so reasons are the reference's own.
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import numpy.typing as npt

from mqstore.storage.format import record

from .compiled_walk import pick, walk_extension
from .walk import Corruption

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

HEAD_COLUMNS = ("total_size", "queue_id", "flag", "queue_offset", "physical_offset",
                "sysflag", "born_timestamp_ms", "store_timestamp_ms", "topic_start",
                "topic_size")
"""The arrays of `Heads`, in the order storage/format/_walk.c writes them."""


@dataclasses.dataclass
class Heads:
    """The fixed fields of n records (one numpy array each, 0 for a corrupt record) plus
    where their topics lie (absolute positions in the segment)."""

    starts: Ints
    total_size: Ints
    queue_id: Ints
    flag: Ints
    queue_offset: Ints
    physical_offset: Ints
    sysflag: Ints
    born_timestamp_ms: Ints
    store_timestamp_ms: Ints
    topic_start: Ints
    topic_size: Ints
    problems: dict[int, str]
    """Record index → why it is corrupt (the good records are not in it)."""

    def take(self, chosen: Ints) -> Heads:
        taken = {name: getattr(self, name)[chosen] for name in ("starts", *HEAD_COLUMNS)}
        renumbered = {new: self.problems[old] for new, old in enumerate(chosen.tolist())
                      if old in self.problems} if self.problems else {}
        return Heads(**taken, problems=renumbered)


def _heads(starts: Ints, columns: Ints, problems: dict[int, str]) -> Heads:
    """`columns` is (len(HEAD_COLUMNS), n): one row per array."""
    return Heads(starts=starts, problems=problems, **dict(zip(HEAD_COLUMNS, columns, strict=True)))


def _checked(buffer: record.ReadableBuffer, position: int, *, base: int,
             verify_crc: bool) -> record.CheckResult | str:
    """The OK `CheckResult` of the record at `position`, or why there is none.  The limit is
    the buffer's end (a walk or a consume queue entry already bounds the record)."""
    size_bytes = len(buffer)
    if not 0 <= position < size_bytes:
        return f"position {position} is outside the segment ({size_bytes} bytes)"
    try:
        check = record.check_record(buffer, position, limit=size_bytes,
                                    expected_physical_offset=base + position,
                                    verify_crc=verify_crc)
    except struct.error:  # TOTALSIZE fits, but the IPv6 head runs past the buffer
        return (f"the record head runs past the end of the segment "
                f"({size_bytes - position} bytes left)")
    if check.status is record.RecordCheck.OK:
        return check
    return check.reason or f"no message here ({check.status.value})"


def record_problem(buffer: record.ReadableBuffer, position: int, base: int,
                   verify_crc: bool) -> str | None:
    """Why the record at `position` is corrupt, or None if it is not."""
    checked = _checked(buffer, position, base=base, verify_crc=verify_crc)
    return checked if isinstance(checked, str) else None


def decode_heads_reference(buffer: record.ReadableBuffer, starts: Ints, *, base: int,
                           verify_crc: bool) -> Heads:
    """Check the records at `starts` (relative to the segment at `base`) and decode their
    fixed fields; a corrupt record's fields are 0 and its reason is in `problems`."""
    columns = np.zeros((len(HEAD_COLUMNS), len(starts)), dtype=np.int64)
    problems: dict[int, str] = {}
    for index, position in enumerate(starts.tolist()):
        checked = _checked(buffer, position, base=base, verify_crc=verify_crc)
        if isinstance(checked, str):
            problems[index] = checked
            continue
        head, layout = checked.head, checked.layout
        assert head is not None and layout is not None
        topic_length_at = position + layout.body_offset + head.body_size_bytes
        (topic_size,) = layout.topic_length.unpack_from(buffer, topic_length_at)
        columns[:, index] = (
            head.total_size, head.queue_id, head.flag, head.queue_offset,
            head.physical_offset, head.sysflag, head.born_timestamp_ms,
            head.store_timestamp_ms, topic_length_at + layout.topic_length.size, topic_size)
    return _heads(starts, columns, problems)


def _decode_heads_compiled(buffer: record.ReadableBuffer, starts: Ints, *, base: int,
                           verify_crc: bool) -> Heads:
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    decoded = walk_extension().decode_heads(buffer, starts, base, verify_crc, record_problem)
    if decoded is None:
        return decode_heads_reference(buffer, starts, base=base, verify_crc=verify_crc)
    raw, problems = decoded
    columns = np.frombuffer(raw, dtype=np.int64).reshape(len(HEAD_COLUMNS), len(starts))
    return _heads(starts, columns, problems)


decode_heads = pick(decode_heads_reference, _decode_heads_compiled)
"""Check and decode the records at `starts` (see `decode_heads_reference`): C, or the
reference itself when MQSTORE_NO_EXTENSIONS=1."""


def corruptions(heads: Heads, *, base: int) -> tuple[list[Corruption], Mask]:
    """The corrupt records as (offset, reason), and the mask of the good ones."""
    good = np.ones(len(heads.starts), dtype=bool)
    good[list(heads.problems)] = False
    found = [Corruption(base + int(heads.starts[i]), heads.problems[i])
             for i in sorted(heads.problems)]
    return found, good
