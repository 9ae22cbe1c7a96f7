"""The streaming reader: `spark.readStream.format("mqstore").load("/data")`.

Offsets are consume queue offsets per (topic, queue), as Kafka's source keeps offsets per
topic partition (stream_offsets.py).  The planner methods (`initialOffset`, `latestOffset`,
`partitions`) run in one long-lived Python process per query on the driver, so the
`QueueScanner` there remembers where each queue ended; `read` runs in executors on a fresh
copy of this object and only reads the exact offset range of its partition, so a replayed
micro-batch reads the same rows (Spark's checkpoint then gives exactly-once file sinks).

| option                 | default  | meaning                                                  |
|------------------------|----------|----------------------------------------------------------|
| topics, queueIds       | all      | as for batch reads                                       |
| startingOffsets        | latest   | `earliest`, `latest`, or JSON (stream_offsets.py)        |
| maxMessagesPerTrigger  | none     | rows per micro-batch at most, shared by backlog          |
| failOnDataLoss         | true     | fail if retention deleted offsets not yet read           |
| onCorruptRecord, verifyCrc, batchRows |  | as for batch reads                              |

`trigger(availableNow=True)` reads what exists when the query starts, in micro-batches of
at most `maxMessagesPerTrigger`, then stops (the `SupportsTriggerAvailableNow` mixin; without
it Spark would fall back to one unlimited batch).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from .options import parse_read_options
from .queue_scan import QueueKey, QueueScanner, list_queues
from .store_files import load_store_files
from .stream_offsets import (
    EARLIEST,
    LATEST,
    Offsets,
    cap_by_rows,
    offsets_from_json,
    offsets_to_json,
)
from .stream_read import QueueRange, read_queue_range
from .stream_settings import StreamSettings, parse_stream_settings

log = logging.getLogger(__name__)

PARTITION_ROWS_MAX = 1_000_000
"""A queue's range is split into partitions of at most this many offsets."""


class MqstoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.read_options = parse_read_options(options)
        self.settings: StreamSettings = parse_stream_settings(options)
        self._scanner: QueueScanner | None = None
        self._target: Offsets | None = None

    # -- planner side (driver) --------------------------------------------------------------
    def _bounds(self) -> dict[QueueKey, tuple[int, int]]:
        if self._scanner is None:
            files = load_store_files(self.read_options.directory)
            self._scanner = QueueScanner(self.read_options.directory,
                                         segment_size_bytes=files.segment_size_bytes)
        selection = self.read_options.selection
        found = {}
        for key in list_queues(self.read_options.directory, selection.topics,
                               selection.queue_ids):
            bounds = self._scanner.bounds(key)
            if bounds is not None:
                found[key] = (bounds.min_offset, bounds.max_offset)
        return found

    def _segment_size_bytes(self) -> int:
        if self._scanner is None:
            self._bounds()
        assert self._scanner is not None
        return self._scanner.segment_size_bytes

    def initialOffset(self) -> dict[str, dict[str, int]]:
        bounds = self._bounds()
        starting = self.settings.starting_offsets
        if starting == "earliest":
            offsets = {key: low for key, (low, _) in bounds.items()}
        elif starting == "latest":
            offsets = {key: high for key, (_, high) in bounds.items()}
        else:
            assert isinstance(starting, dict)
            offsets = {}
            for key, offset in starting.items():
                low, high = bounds.get(key, (0, 0))
                offsets[key] = low if offset == EARLIEST else high if offset == LATEST else offset
        return offsets_to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        rows = self.settings.max_messages_per_trigger
        return ReadMaxRows(rows) if rows is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {key: high for key, (_, high) in self._bounds().items()}

    def latestOffset(self, start: dict[str, dict[str, int]],
                     limit: ReadLimit) -> dict[str, dict[str, int]]:
        begin = offsets_from_json(start, what="start offset")
        bounds = self._bounds()
        effective_start = dict(begin)
        end = dict(begin)
        for key, (low, high) in bounds.items():
            effective_start.setdefault(key, low)
            stop = high if self._target is None else min(
                high, self._target.get(key, effective_start[key]))
            if stop < effective_start[key]:
                log.warning("mqstore: queue %s/%d ends at %d, below the %d already read "
                            "(the indexer cut it back after a crash); waiting", key[0],
                            key[1], stop, effective_start[key])
                stop = effective_start[key]
            end[key] = stop
        if isinstance(limit, ReadMaxRows):
            end = cap_by_rows(effective_start, end, limit.max_rows)
        return offsets_to_json(end)

    def partitions(self, start: dict[str, dict[str, int]],
                   end: dict[str, dict[str, int]]) -> list[InputPartition]:
        begin = offsets_from_json(start, what="start offset")
        finish = offsets_from_json(end, what="end offset")
        planned: list[InputPartition] = []
        for (topic, queue_id), stop in sorted(finish.items()):
            first = begin.get((topic, queue_id))
            low = 0 if first is None else first
            for chunk_start in range(low, stop, PARTITION_ROWS_MAX):
                planned.append(QueueRange(
                    self.read_options.directory, topic, queue_id, chunk_start,
                    min(stop, chunk_start + PARTITION_ROWS_MAX),
                    segment_size_bytes=self._segment_size_bytes(),
                    from_earliest=first is None or not self.settings.fail_on_data_loss))
        return planned

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Nothing to do: the log is the broker's, and retention is its business."""

    # -- executor side ----------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueRange):
            return iter(())
        return read_queue_range(partition, self.read_options)
