"""Records of one segment to Arrow record batches of `schema.ARROW_SCHEMA`: decode, check,
select, build the columns.

Corrupt records (see decode.py for the checks) fail the read with `CorruptRecordError`, which
names every bad offset of the batch, or with `OnCorrupt.SKIP` are dropped and logged (with
their offsets) on the executor.  The engine's group-commit fillers (storage/format/padding.py) are
never rows, as `MessageStore.iter_messages` never yields them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from mqstore.storage.errors import StoreFormatError
from mqstore.storage.format.padding import PADDING_TOPIC

from .columns import string_array, take_ranges
from .decode import Heads, corruptions, decode_heads
from .options import OnCorrupt, Selection
from .record_columns import record_columns
from .schema import ARROW_SCHEMA, TIMESTAMP_TYPE
from .walk import Corruption

log = logging.getLogger(__name__)

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

class CorruptRecordError(StoreFormatError):
    """Records failed their checks and the read was told to fail (the default)."""

    def __init__(self, directory: str, found: list[Corruption]) -> None:
        self.corruptions = found
        listed = "; ".join(f"{c.physical_offset}: {c.reason}" for c in found[:10])
        more = f" (and {len(found) - 10} more)" if len(found) > 10 else ""
        super().__init__(f"{directory}: {len(found)} corrupt record(s) at physical offset "
                         f"{listed}{more}; read with .option('onCorruptRecord', 'skip') to "
                         f"drop them, or run `mqstore pipeline verify`")


@dataclasses.dataclass(frozen=True)
class Expected:
    """What a consume queue said the records are (streaming): checked record by record."""

    topic: str
    queue_id: int
    queue_offsets: Ints
    sizes: Ints


def report(directory: str, found: list[Corruption], on_corrupt: OnCorrupt) -> None:
    if not found:
        return
    if on_corrupt is OnCorrupt.FAIL:
        raise CorruptRecordError(directory, found)
    for corruption in found:
        log.warning("mqstore: skipped the corrupt record at physical offset %d in %s: %s",
                    corruption.physical_offset, directory, corruption.reason)


def record_batches(buffer: memoryview, *, directory: str, base: int, starts: Ints,
                   selection: Selection | None, verify_crc: bool, on_corrupt: OnCorrupt,
                   batch_rows: int, expected: Expected | None = None
                   ) -> Iterator[pa.RecordBatch]:
    """Batches of the records at `starts` (relative to the segment at `base`)."""
    data = np.frombuffer(buffer, dtype=np.uint8)
    for first in range(0, len(starts), batch_rows):
        heads = decode_heads(buffer, starts[first:first + batch_rows], base=base,
                             verify_crc=verify_crc)
        if expected is not None:
            _check_expected(heads, expected, first, base=base)
        found, good = corruptions(heads, base=base)
        report(directory, found, on_corrupt)
        topics = string_array(*take_ranges(data, heads.topic_start, heads.topic_size))
        keep = good & _selected(heads, topics, selection)
        if keep.all():
            yield _batch(buffer, heads, topics)
        elif keep.any():
            chosen = np.flatnonzero(keep)
            yield _batch(buffer, heads.take(chosen), topics.take(pa.array(chosen)))


def _selected(heads: Heads, topics: pa.Array, selection: Selection | None) -> Mask:
    keep = np.asarray(pc.not_equal(topics, PADDING_TOPIC).to_numpy(zero_copy_only=False),
                      dtype=bool)
    if selection is None:
        return keep
    if selection.topics is not None:
        wanted = pa.array(sorted(selection.topics), type=pa.string())
        keep &= np.asarray(pc.is_in(topics, value_set=wanted).to_numpy(zero_copy_only=False),
                           dtype=bool)
    if selection.queue_ids is not None:
        keep &= np.isin(heads.queue_id, np.fromiter(selection.queue_ids, np.int64))
    keep &= heads.physical_offset >= selection.physical_offset_start
    keep &= heads.physical_offset < selection.physical_offset_end
    if selection.store_timestamp_start_ms is not None:
        keep &= heads.store_timestamp_ms >= selection.store_timestamp_start_ms
    if selection.store_timestamp_end_ms is not None:
        keep &= heads.store_timestamp_ms < selection.store_timestamp_end_ms
    return keep


def _check_expected(heads: Heads, expected: Expected, first: int, *, base: int) -> None:
    rows = slice(first, first + len(heads.starts))
    wrong = (heads.queue_id != expected.queue_id) \
        | (heads.queue_offset != expected.queue_offsets[rows]) \
        | (heads.total_size != expected.sizes[rows])
    for index in np.flatnonzero(wrong).tolist():
        if index not in heads.problems:
            heads.problems[index] = (
                f"consume queue {expected.topic}/{expected.queue_id} offset "
                f"{expected.queue_offsets[first + index]} points here, but the record has "
                f"queue {heads.queue_id[index]}, offset {heads.queue_offset[index]}, size "
                f"{heads.total_size[index]}")


def _timestamps(milliseconds: Ints) -> pa.Array:
    return pa.array(milliseconds * 1000, type=pa.int64()).view(TIMESTAMP_TYPE)


def _batch(buffer: memoryview, heads: Heads, topics: pa.Array) -> pa.RecordBatch:
    variable = record_columns(buffer, heads.starts)
    columns = [
        topics,
        pa.array(heads.queue_id.astype(np.int32)),
        pa.array(heads.queue_offset),
        pa.array(heads.physical_offset),
        pa.array(heads.total_size.astype(np.int32)),
        variable.body,
        variable.tags,
        variable.keys,
        variable.properties,
        _timestamps(heads.born_timestamp_ms),
        _timestamps(heads.store_timestamp_ms),
        variable.born_host,
        variable.store_host,
        variable.msg_id,
        pa.array(heads.sysflag.astype(np.int32)),
        pa.array(heads.flag.astype(np.int32)),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
