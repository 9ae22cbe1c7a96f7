"""Reindex job: consume queues and the index rebuilt from the commit log alone, into a new
directory, byte for byte what the engine's dispatch writes.

Dispatch (storage/dispatch/dispatcher.py) does, per record in log order: a consume queue entry
(position, size, hash of TAGS) at the record's queue offset, for untransacted and committed
messages; and index entries `topic#UNIQ_KEY`, then `topic#key` per KEYS entry, then
`topic#T#<tags>` (index_tags_enabled), for every message, into the newest index file, a new
one when it is full.  Here Spark splits that work
without changing a byte of the result:

* consume queues: rows are partitioned by (topic, queue) and sorted by queue offset, and each
  task appends its queues' entries with the engine's own `ConsumeQueue.put`;
* index: every key gets its rank in log order (a global sort, then `zipWithIndex`), so key n
  belongs to file n // (index_count_max - 1), exactly where the engine's roll puts it.  Each
  file is written by one task with the engine's `IndexFile` (its header starts from the end of
  the previous file, as `IndexService` creates it), so the files are built in parallel.

File names differ: an index file is named after its creation time, so the rebuilt files take
increasing names from the job's start.  The output is refused if it exists and is not empty.
Consume queues of a log whose start retention deleted begin with filler entries where the
engine's deleted files were.  On a cluster the output must be a directory every executor
writes (a shared volume).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from mqstore.storage import StoreConfig
from mqstore.storage.files.index_file import IndexFile
from mqstore.storage.files.io import make_directories
from mqstore.storage.format import record
from mqstore.storage.format.java_hash import java_string_hash
from mqstore.storage.format.properties import PROPERTY_UNIQUE_KEY
from mqstore.storage.format.volume import (
    CREATING_DIRECTORY,
    INDEX_DIRECTORY,
    creating_name,
    index_file_name,
    index_file_name_after,
)
from mqstore.storage.index.index_service import INDEX_TAG_TYPE, index_key
from mqstore.storage.queues.consume_queues import ConsumeQueues

from .job_export import store_frame

_DISPATCHED_TRANSACTION_TYPES = (0, int(record.SysFlag.TRANSACTION_COMMIT))


@dataclasses.dataclass(frozen=True)
class ReindexSettings:
    consume_queue_file_size_bytes: int
    index_enabled: bool
    index_hash_slot_count: int
    index_count_max: int
    index_tags: bool = True
    """Tag entries too: `StoreConfig.index_tags_enabled`, resolved for the store read
    (`index_tags_for_store`: None means as its index holds)."""
    queue_tasks: int = 8
    """Tasks that write consume queues (each writes whole queues)."""


@dataclasses.dataclass(frozen=True)
class ReindexResult:
    queue_entries: int
    index_keys: int
    index_files: int


def _write_queues(output: str, file_size_bytes: int, rows: Iterable[Row]) -> None:
    # The job writes queues whole, so the store's default step is as good as any.
    queues = ConsumeQueues(Path(output), file_size_bytes=file_size_bytes,
                           allocate_step_bytes=StoreConfig().consume_queue_allocate_step_bytes)
    try:
        for row in rows:
            queue = queues.get_or_create(row.topic, row.queue_id)
            queue.put(physical_offset=row.physical_offset, size_bytes=row.record_size_bytes,
                      tags_code=java_string_hash(row.tags) if row.tags else 0,
                      queue_offset=row.queue_offset)
        queues.flush(pages_min=0)
    finally:
        queues.close()


_TAG_MARK = "\x00T\x00"
"""Marks the tag among a message's keys (KEYS never hold a NUL): it is indexed typed."""


def _indexed_key(topic: str, key: str) -> str:
    if key.startswith(_TAG_MARK):
        return index_key(topic=topic, key=key[len(_TAG_MARK):], index_type=INDEX_TAG_TYPE)
    return index_key(topic=topic, key=key)


def _write_index_files(output: str, names: list[str], previous_ends: dict[int, tuple[int, int]],
                       settings: ReindexSettings,
                       keys: Iterable[tuple[tuple[int, int], tuple[int, int, str]]]) -> None:
    current: IndexFile | None = None
    current_number = -1
    try:
        for (number, _), (physical_offset, store_ms, key) in keys:
            if number != current_number:
                if current is not None:
                    current.flush()
                    current.close()
                previous_offset, previous_ms = previous_ends.get(number, (0, 0))
                creating = Path(output) / CREATING_DIRECTORY
                make_directories(creating, root=Path(output))
                current = IndexFile.create(
                    Path(output) / INDEX_DIRECTORY / names[number],
                    creating=creating / creating_name(INDEX_DIRECTORY, names[number]),
                    hash_slot_count=settings.index_hash_slot_count,
                    index_count_max=settings.index_count_max,
                    previous_end_physical_offset=previous_offset,
                    previous_end_timestamp_ms=previous_ms)
                current_number = number
            assert current is not None
            stored = current.put_key(key, physical_offset=physical_offset,
                                     store_timestamp_ms=store_ms)
            assert stored, f"index file {number} overfull: ranks were assigned wrongly"
        if current is not None:
            current.flush()
    finally:
        if current is not None:
            current.close()


def _rebuild_queues(spark: SparkSession, directory: str, output: str,
                    settings: ReindexSettings) -> int:
    frame = store_frame(spark, directory)
    transaction = F.col("sysflag").bitwiseAND(int(record.TRANSACTION_TYPE_MASK))
    entries = frame.where(transaction.isin(*_DISPATCHED_TRANSACTION_TYPES)).select(
        "topic", "queue_id", "queue_offset", "physical_offset", "record_size_bytes", "tags")
    entries = entries.repartition(settings.queue_tasks, "topic", "queue_id") \
        .sortWithinPartitions("topic", "queue_id", "queue_offset").cache()
    try:
        count = entries.count()
        entries.foreachPartition(functools.partial(
            _write_queues, output, settings.consume_queue_file_size_bytes))
    finally:
        entries.unpersist()
    return int(count)


def _rebuild_index(spark: SparkSession, directory: str, output: str,
                   settings: ReindexSettings) -> tuple[int, int]:
    unique_key = F.col("properties").getItem(PROPERTY_UNIQUE_KEY)
    empty = F.array().cast("array<string>")
    leading = F.when(unique_key.isNotNull() & (unique_key != ""), F.array(unique_key)) \
        .otherwise(empty)
    trailing = F.when(F.col("tags").isNotNull() & (F.col("tags") != ""),
                      F.array(F.concat(F.lit(_TAG_MARK), F.col("tags")))).otherwise(empty) \
        if settings.index_tags else empty
    keyed = store_frame(spark, directory).select(
        "physical_offset", F.unix_millis("store_timestamp").alias("store_ms"), "topic",
        F.posexplode(F.concat(leading, F.col("keys"), trailing)).alias("position", "key"))
    ranked = keyed.orderBy("physical_offset", "position").rdd.zipWithIndex()
    per_file = settings.index_count_max - 1
    by_file = ranked.map(lambda pair: ((pair[1] // per_file, pair[1]), (
        pair[0].physical_offset, pair[0].store_ms,
        _indexed_key(pair[0].topic, pair[0].key)))).cache()
    try:
        key_count = by_file.count()
        if key_count == 0:
            return 0, 0
        file_count = -(-key_count // per_file)
        lasts = by_file.filter(lambda item: item[0][1] % per_file == per_file - 1) \
            .map(lambda item: (item[0][0] + 1, (item[1][0], item[1][1]))).collect()
        names = [index_file_name(time.time_ns() // 1_000_000)]
        while len(names) < file_count:
            names.append(index_file_name_after(names[-1]))
        (Path(output) / INDEX_DIRECTORY).mkdir(parents=True, exist_ok=True)
        by_file.repartitionAndSortWithinPartitions(
            file_count, partitionFunc=lambda key: key[0]).foreachPartition(functools.partial(
                _write_index_files, output, names, dict(lasts), settings))
    finally:
        by_file.unpersist()
    return int(key_count), file_count


def reindex(spark: SparkSession, directory: str, output: str,
            settings: ReindexSettings) -> ReindexResult:
    target = Path(output)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(f"{output}: exists and is not an empty directory; reindex "
                              f"writes a new one")
    if Path(directory).resolve() == target.resolve():
        raise ValueError("reindex writes into a new directory, not the store itself")
    target.mkdir(parents=True, exist_ok=True)
    entries = _rebuild_queues(spark, directory, output, settings)
    keys, files = (_rebuild_index(spark, directory, output, settings)
                   if settings.index_enabled else (0, 0))
    return ReindexResult(queue_entries=entries, index_keys=keys, index_files=files)
