"""The reader's options: parsed once, checked, and carried to the executors as one value.

Spark hands a data source its options as a case-insensitive map of strings
(`.option("queueIds", "0,1")`).  Every option is parsed here, and a bad value is a
`ValueError` naming the option and what it accepts: nothing is read with a half-understood
selection.

| option                  | default   | meaning                                                   |
|-------------------------|-----------|-----------------------------------------------------------|
| path (`.load(path)`)    | required  | the store directory (the one holding `commitlog/`)        |
| topics                  | all       | comma-separated topic names                               |
| queueIds                | all       | comma-separated queue ids                                 |
| physicalOffsetStart     | 0         | first commit log position read (inclusive)                |
| physicalOffsetEnd       | none      | end position (exclusive)                                  |
| storeTimestampStartMs   | none      | first store time read, ms since the epoch (inclusive)     |
| storeTimestampEndMs     | none      | end store time, ms since the epoch (exclusive)            |
| onCorruptRecord         | fail      | `fail`: the query fails naming the offset; `skip`: the    |
|                         |           | record is dropped and logged with its offset              |
| verifyCrc               | true      | also check every body's CRC (docs/benchmarks/spark.md:    |
|                         |           | its cost is within the noise of a scan)                   |
| maxPartitionBytes       | 128 MiB   | a segment larger than this is split into record-aligned   |
|                         |           | ranges of about this size (one input partition each)      |
| batchRows               | 10000     | rows per Arrow record batch handed to Spark               |
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import TypeVar

from mqstore.storage.config_text import parse_bool
from mqstore.storage.format.padding import PADDING_TOPIC

MAX_PARTITION_BYTES_DEFAULT = 128 << 20
"""Spark's own `spark.sql.files.maxPartitionBytes` default: a task of this many bytes of
records takes well under a second to decode, and a 1 GiB segment becomes 8 tasks."""

BATCH_ROWS_DEFAULT = 10_000
"""Spark's `spark.sql.execution.arrow.maxRecordsPerBatch` default."""

BATCH_ROWS_MAX = 1_000_000
POSITION_MAX = (1 << 63) - 1

E = TypeVar("E", bound=enum.Enum)


class OnCorrupt(enum.Enum):
    FAIL = "fail"
    SKIP = "skip"


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which messages a read returns; `None` means "no bound"."""

    topics: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    physical_offset_start: int = 0
    physical_offset_end: int = POSITION_MAX
    store_timestamp_start_ms: int | None = None
    store_timestamp_end_ms: int | None = None

    def __post_init__(self) -> None:
        if self.physical_offset_start > self.physical_offset_end:
            raise ValueError(f"physicalOffsetStart {self.physical_offset_start} is after "
                             f"physicalOffsetEnd {self.physical_offset_end}")
        start, end = self.store_timestamp_start_ms, self.store_timestamp_end_ms
        if start is not None and end is not None and start > end:
            raise ValueError(f"storeTimestampStartMs {start} is after storeTimestampEndMs {end}")


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    directory: str
    selection: Selection
    on_corrupt: OnCorrupt = OnCorrupt.FAIL
    verify_crc: bool = True
    max_partition_bytes: int = MAX_PARTITION_BYTES_DEFAULT
    batch_rows: int = BATCH_ROWS_DEFAULT


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Parse Spark's (case-insensitive) option map; `ValueError` for anything wrong."""
    lowered = {key.lower(): value for key, value in options.items()}
    directory = lowered.get("path")
    if not directory:
        raise ValueError("mqstore: no store directory: use .load('/path/to/store') or "
                         ".option('path', ...)")
    selection = Selection(
        topics=_topics(lowered.get("topics")),
        queue_ids=_int_set(lowered.get("queueids"), "queueIds"),
        physical_offset_start=_int(lowered, "physicalOffsetStart", 0, minimum=0),
        physical_offset_end=_int(lowered, "physicalOffsetEnd", POSITION_MAX, minimum=0),
        store_timestamp_start_ms=_optional_int(lowered, "storeTimestampStartMs"),
        store_timestamp_end_ms=_optional_int(lowered, "storeTimestampEndMs"))
    return ReadOptions(
        directory=directory, selection=selection,
        on_corrupt=_choice(lowered, "onCorruptRecord", OnCorrupt, OnCorrupt.FAIL),
        verify_crc=_bool(lowered, "verifyCrc", default=True),
        max_partition_bytes=_int(lowered, "maxPartitionBytes", MAX_PARTITION_BYTES_DEFAULT,
                                 minimum=4096),
        batch_rows=_int(lowered, "batchRows", BATCH_ROWS_DEFAULT, minimum=1,
                        maximum=BATCH_ROWS_MAX))


def _topics(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    topics = frozenset(part.strip() for part in text.split(",") if part.strip())
    if not topics:
        raise ValueError(f"topics={text!r}: expected comma-separated topic names")
    if PADDING_TOPIC in topics:
        raise ValueError(f"topics: {PADDING_TOPIC} is the engine's filler, never a message")
    return topics


def _int_set(text: str | None, name: str) -> frozenset[int] | None:
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() for part in parts):
        raise ValueError(f"{name}={text!r}: expected comma-separated non-negative integers")
    return frozenset(int(part) for part in parts)


def _int(options: Mapping[str, str], name: str, default: int, *, minimum: int,
         maximum: int = POSITION_MAX) -> int:
    text = options.get(name.lower())
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected an integer") from None
    if not minimum <= value <= maximum:
        raise ValueError(f"{name}={value}: must be in [{minimum}, {maximum}]")
    return value


def _optional_int(options: Mapping[str, str], name: str) -> int | None:
    if options.get(name.lower()) is None:
        return None
    return _int(options, name, 0, minimum=-POSITION_MAX)


def _bool(options: Mapping[str, str], name: str, *, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    return parse_bool(text, where=name)


def _choice(options: Mapping[str, str], name: str, kind: type[E],
                          default: E) -> E:
    text = options.get(name.lower())
    if text is None:
        return default
    try:
        return kind(text.strip().lower())
    except ValueError:
        choices = ", ".join(str(member.value) for member in kind)
        raise ValueError(f"{name}={text!r}: expected one of {choices}") from None
