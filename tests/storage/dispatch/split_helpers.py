"""Helpers for the split (writer + indexer) tests: configs and an exact comparison of the
consume queues the indexer built with the records in the commit log."""

from __future__ import annotations

import time
from pathlib import Path

from mqstore.storage import MessageStore, StoreConfig
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.checkpoint import encode_checkpoint, read_checkpoint
from mqstore.storage.queues.consume_queues import ConsumeQueues
from mqstore.storage.reads.store_view import StoreView
from tests.conftest import small_config


def writer_config(**overrides: object) -> StoreConfig:
    return small_config(dispatch_enabled=False, positions_publish_enabled=True,
                        positions_publish_gap_us=100, **overrides)


def indexer_config(**overrides: object) -> StoreConfig:
    return small_config(queue_flush_interval_ms=20, queue_flush_thorough_interval_ms=50,
                        **overrides)


def wait_dispatched(indexer: Indexer, position: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while indexer.dispatched_position < position:
        assert indexer.failure is None, indexer.failure
        assert time.monotonic() < deadline, \
            f"dispatch at {indexer.dispatched_position} < {position}"
        time.sleep(0.005)


def wait_readable(directory: Path, position: int, timeout_s: float = 20.0) -> None:
    """Until a reader of `directory` (a `StoreView`, as the notifier and the writer's
    schedules read) sees the log committed and dispatched up to `position`: the indexer's
    `dispatched` file, not only its memory (the file follows the queues' flush)."""
    deadline = time.monotonic() + timeout_s
    with StoreView.open(directory, indexer_config()) as view:
        while view.log.committed_position < position or view.dispatched_position < position:
            assert time.monotonic() < deadline, (
                f"readable to {view.log.committed_position} committed, "
                f"{view.dispatched_position} dispatched < {position}")
            time.sleep(0.005)
            view.refresh()


def log_records(directory: Path) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """{(topic, queue): [(physical offset, size), ...]} from the commit log, read by an
    embedded store that dispatches nothing."""
    expected: dict[tuple[str, int], list[tuple[int, int]]] = {}
    with MessageStore.open(directory, small_config(dispatch_enabled=False)) as store:
        for message in store.iter_messages():
            key = (message.topic, message.queue_id)
            assert message.queue_offset == len(expected.setdefault(key, [])), message
            expected[key].append((message.physical_offset, message.total_size))
    return expected


def queue_entries(directory: Path) -> dict[tuple[str, int], list[tuple[int, int]]]:
    config = small_config()
    queues = ConsumeQueues(directory, file_size_bytes=config.consume_queue_file_size_bytes,
                           allocate_step_bytes=config.consume_queue_allocate_step_bytes)
    queues.load()
    found: dict[tuple[str, int], list[tuple[int, int]]] = {}
    try:
        for queue in queues:
            entries: list[tuple[int, int]] = []
            offset = queue.min_offset
            while offset < queue.max_offset:
                held = queue.read(offset, 1000)
                assert held is not None
                queue_file, view = held
                del held
                entries.extend(zip(view["physical_offset"].tolist(), view["size"].tolist(),
                                   strict=True))
                offset += len(view)
                del view
                queue_file.release()
            found[queue.topic, queue.queue_id] = entries
    finally:
        queues.close()
    return found


def lose_log_tail(store_dir: Path, lost_from: int) -> None:
    """A machine crash that lost the commit log's bytes from `lost_from` on (zeros): bytes
    that were never synced, so the checkpoint (which records only synced positions) says
    at most `lost_from`, and the writer left its abort marker."""
    checkpoint = store_dir / "checkpoint"
    values, _ = read_checkpoint(checkpoint)
    values.master_flushed_offset = min(values.master_flushed_offset, lost_from)
    checkpoint.write_bytes(encode_checkpoint(values))
    (store_dir / "abort").touch()
    segments = sorted((store_dir / "commitlog").iterdir())
    for path in segments:
        start = int(path.name)
        size = path.stat().st_size
        if start + size <= lost_from:
            continue
        cut = max(0, lost_from - start)
        with open(path, "r+b") as raw:
            raw.seek(cut)
            raw.write(bytes(size - cut))
