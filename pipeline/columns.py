"""Arrow columns from byte ranges of a segment, built with numpy instead of per-row Python.

PySpark moves a data source's rows to the JVM as Arrow either way; a `read()` that yields
ready `pyarrow.RecordBatch`es skips the per-row conversion, which costs more than decoding
(see docs/benchmarks/spark.md).  The topics, needed for every record before rows are
selected, are cut out of the segment here with index arithmetic (`take_ranges` gathers many
short byte ranges into one buffer plus Arrow offsets); the other variable columns come from
record_columns.py.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

Bytes = npt.NDArray[np.uint8]
Ints = npt.NDArray[np.int64]


def take_ranges(data: Bytes, starts: Ints, lengths: Ints) -> tuple[Bytes, Ints]:
    """The ranges [start, start + length) of `data`, concatenated, and their offsets (n + 1)."""
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return np.zeros(0, np.uint8), offsets
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
    return data[index], offsets


def string_array(data: Bytes, offsets: Ints) -> pa.Array:
    """A non-large Arrow string array; bytes that are not UTF-8 are replaced as the engine's
    decoder does (`errors="replace"`)."""
    count = len(offsets) - 1
    assert int(offsets[-1]) < 1 << 31, "one batch's strings must fit 32-bit Arrow offsets"
    array = pa.Array.from_buffers(pa.string(), count, [
        None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        raw = data.tobytes()
        texts = [raw[offsets[i]:offsets[i + 1]].decode("utf-8", "replace")
                 for i in range(count)]
        array = pa.array(texts, type=pa.string())
    return array
