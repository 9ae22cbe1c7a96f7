"""The writer: `df.write.format("mqstore").mode("append").save("/data")`.

Columns: `topic` (string), `queue_id` (int), `body` (binary, or string as UTF-8), and
optionally `tags` (string), `keys` (array<string>), `properties` (map<string,string>).

A store has one writer (its lock), so tasks do not append themselves: each task checks its
rows and stages them as an Arrow IPC file under `<store>/pipeline-staging/<job>/`, and the
driver's `commit` appends every staged file, in partition order, through the engine
(`MessageStore.put_batch`) and removes them.  A failed job (`abort`) leaves the log untouched.
A failure while committing (the store refusing a put, a full disk) stops at that batch: the
error says how many rows were appended and leaves the rest staged.  `mode("overwrite")` is
refused: a commit log is append-only.  Needs a store no other process holds open (a running
writer service takes its lock: produce over its HTTP API instead); on a cluster the
directory must be shared by the driver and the executors.

Options: `store.<field>` for the engine's settings (store_config.py), and
`putBatchMessages` (default 256) messages per `put_batch`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType
from tqdm import tqdm

from mqstore.storage import (
    Message,
    MessageIllegalError,
    MessageStore,
    StoreConfig,
    StoreLockedError,
    validate_topic,
)

from .schema import check_write_schema
from .store_config import store_config_from_options

STAGING_DIRECTORY = "pipeline-staging"
PUT_BATCH_MESSAGES_DEFAULT = 256
"""Messages per `put_batch`: large enough to amortise the put lock, small enough to stay far
below `put_batch_size_bytes_max` for bodies of a few KiB."""


@dataclasses.dataclass(frozen=True)
class StagedPart(WriterCommitMessage):
    partition_id: int
    path: str
    rows: int


class OverwriteRefusedError(ValueError):
    """`mode("overwrite")` on a commit log."""


class MqstoreWriter(DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType, *,
                 overwrite: bool) -> None:
        if overwrite:
            raise OverwriteRefusedError(
                "mqstore: mode('overwrite') is refused: a commit log is append-only and "
                "consumers hold offsets into it; use mode('append')")
        check_write_schema(schema)
        lowered = {key.lower(): value for key, value in options.items()}
        directory = lowered.get("path")
        if not directory:
            raise ValueError("mqstore write: no store directory: use .save('/path/to/store')")
        self.directory = directory
        self.options = dict(options)
        text = lowered.get("putbatchmessages", str(PUT_BATCH_MESSAGES_DEFAULT))
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"putBatchMessages={text!r}: expected a positive integer")
        self.put_batch_messages = int(text)
        self.job = uuid.uuid4().hex
        # Checked on the planner, before any task runs: the options make a valid config.
        self.topic_size_bytes_max = self._config().topic_size_bytes_max

    def _config(self) -> StoreConfig:
        path = Path(self.directory)
        return store_config_from_options(self.options, directory=path if path.is_dir() else None)

    @property
    def staging(self) -> Path:
        return Path(self.directory) / STAGING_DIRECTORY / self.job

    # -- executors -------------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedPart:
        from pyspark import TaskContext  # noqa: PLC0415

        context = TaskContext.get()
        partition_id = context.partitionId() if context is not None else 0
        self.staging.mkdir(parents=True, exist_ok=True)
        path = self.staging / f"part-{partition_id:05d}-{uuid.uuid4().hex}.arrow"
        rows = 0
        writer = None
        try:
            for batch in iterator:
                _check_rows(batch, first_row=rows, topic_size_bytes_max=self.topic_size_bytes_max)
                if writer is None:
                    writer = pa.ipc.new_file(str(path), batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
        except BaseException:
            if writer is not None:
                writer.close()
            path.unlink(missing_ok=True)
            raise
        if writer is not None:
            writer.close()
        return StagedPart(partition_id, str(path) if rows else "", rows)

    # -- driver ------------------------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        parts = sorted((m for m in messages if isinstance(m, StagedPart) and m.rows),
                       key=lambda m: m.partition_id)
        total = sum(part.rows for part in parts)
        appended = 0
        config = self._config()
        try:
            store = MessageStore.open(self.directory, config)
        except StoreLockedError as error:
            raise StoreLockedError(f"mqstore write: {error}; nothing was appended, the rows "
                                   f"stay staged in {self.staging}") from None
        # The driver appends every row alone, after Spark's stages: on a terminal, a bar.
        with store, tqdm(total=total, unit="msg", desc="mqstore write: appending",
                         file=sys.stderr, disable=not sys.stderr.isatty()) as progress:
            for part in parts:
                appended = _append_part(store, part, appended=appended, total=total,
                                        put_batch_messages=self.put_batch_messages,
                                        on_appended=progress.update)
                os.unlink(part.path)
        shutil.rmtree(self.staging, ignore_errors=True)
        _remove_if_empty(Path(self.directory) / STAGING_DIRECTORY)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        _remove_if_empty(Path(self.directory) / STAGING_DIRECTORY)


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: another job's staging is there
        path.rmdir()


def _check_rows(batch: pa.RecordBatch, *, first_row: int, topic_size_bytes_max: int) -> None:
    """Refuse, before anything is staged, what the engine would refuse later."""
    for name in ("topic", "queue_id", "body"):
        column = batch.column(name)
        if column.null_count:
            row = first_row + column.is_null().to_pylist().index(True)
            raise MessageIllegalError(f"mqstore write: row {row}: {name} is null")
    for index, (topic, queue_id) in enumerate(zip(batch.column("topic").to_pylist(),
                                                  batch.column("queue_id").to_pylist(),
                                                  strict=True)):
        try:
            validate_topic(topic, size_bytes_max=topic_size_bytes_max)
        except ValueError as error:
            raise MessageIllegalError(f"mqstore write: row {first_row + index}: "
                                      f"{error}") from None
        if queue_id < 0 or queue_id > 0x7FFFFFFF:
            raise MessageIllegalError(f"mqstore write: row {first_row + index}: queue_id "
                                      f"{queue_id} is not in [0, 2^31)")


def _messages(batch: pa.RecordBatch) -> list[Message]:
    columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
    count = batch.num_rows
    bodies = [body.encode() if isinstance(body, str) else body for body in columns["body"]]
    tags = columns.get("tags", [None] * count)
    keys = columns.get("keys", [None] * count)
    properties = columns.get("properties", [None] * count)
    return [Message(columns["topic"][i], columns["queue_id"][i], bodies[i], tags[i],
                    tuple(keys[i] or ()), dict(properties[i]) if properties[i] else None)
            for i in range(count)]


def _encoded_size_bytes_max(message: Message) -> int:
    """An upper bound of the record's size: fixed part with two IPv6 hosts, body, topic, and
    properties with TAGS, KEYS and a UNIQ_KEY of 64 characters."""
    properties = sum(len(name.encode()) + len(value.encode()) + 2
                     for name, value in (message.properties or {}).items())
    keys = sum(len(key.encode()) + 1 for key in message.keys)
    tags = len(message.tags.encode()) if message.tags else 0
    return 116 + len(message.body) + len(message.topic) + properties + keys + tags + 96


def _chunks(messages: list[Message], *, count_max: int, bytes_max: int) -> Iterator[list[Message]]:
    """Consecutive runs of at most `count_max` messages and (bound) `bytes_max` bytes."""
    chunk: list[Message] = []
    size = 0
    for message in messages:
        estimate = _encoded_size_bytes_max(message)
        if chunk and (len(chunk) >= count_max or size + estimate > bytes_max):
            yield chunk
            chunk, size = [], 0
        chunk.append(message)
        size += estimate
    if chunk:
        yield chunk


def _append_part(store: MessageStore, part: StagedPart, *, appended: int, total: int,
                 put_batch_messages: int, on_appended: Callable[[int], object]) -> int:
    bytes_max = store.config.put_batch_size_bytes_max
    with pa.OSFile(part.path, "rb") as source:
        reader = pa.ipc.open_file(source)
        for index in range(reader.num_record_batches):
            messages = _messages(reader.get_batch(index))
            for chunk in _chunks(messages, count_max=put_batch_messages, bytes_max=bytes_max):
                results = store.put_batch(chunk)
                failed = next((r for r in results if not r.ok), None)
                if failed is not None or len(results) != len(chunk):
                    reason = (f"{failed.status.name}: {failed.reason}" if failed is not None
                              else "short batch result")
                    raise MessageIllegalError(
                        f"mqstore write: the store refused a batch ({reason}); {appended} of "
                        f"{total} rows were appended, the rest stay staged in {part.path} and "
                        f"after it")
                appended += len(chunk)
                on_appended(len(chunk))
    return appended
