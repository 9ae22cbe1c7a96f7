"""What the dispatch differential tests share: a log damaged at random, dispatched in passes of
given sizes over the queues and index on disk, and the files it leaves."""

from __future__ import annotations

import random
from pathlib import Path

from mqstore.storage import StoreConfig
from mqstore.storage.dispatch.dispatcher import Dispatcher
from mqstore.storage.format import volume
from mqstore.storage.index.index_service import IndexService
from mqstore.storage.log.reader import CommitLogReader
from mqstore.storage.queues.consume_queues import ConsumeQueues


def damage(directory: Path, positions: list[int], rng: random.Random, *,
           segment_bytes: int) -> None:
    """Change one byte of the heads of up to three records (not the first)."""
    for position in rng.sample(positions[1:], k=min(3, len(positions) - 1)):
        start = position // segment_bytes * segment_bytes
        segment = directory / volume.COMMITLOG_DIRECTORY / f"{start:020d}"
        with segment.open("r+b") as file:
            file.seek(position % segment_bytes + rng.choice([4, 28, 84]))
            file.write(bytes([rng.randrange(256)]))


def dispatch(directory: Path, config: StoreConfig, end: int, passes: list[int], *,
             start: int = 0) -> tuple[object, ...]:
    """Dispatch [start, end) in passes of the sizes `passes` gives, in turn; the dispatcher's
    state, every pass's notices, the queues' next offsets and their physical end."""
    reader = CommitLogReader(directory / volume.COMMITLOG_DIRECTORY,
                             segment_size_bytes=config.segment_size_bytes)
    queues = ConsumeQueues(directory, file_size_bytes=config.consume_queue_file_size_bytes,
                           allocate_step_bytes=config.consume_queue_allocate_step_bytes)
    index = IndexService(directory=directory / volume.INDEX_DIRECTORY,
                         hash_slot_count=config.index_hash_slot_count,
                         index_count_max=config.index_count_max,
                         query_results_max=config.index_query_results_max)
    queues.load()
    index.load(abnormal=False, index_timestamp_ms=0)
    notices = []
    try:
        dispatcher = Dispatcher(reader, queues, index=index, dispatched_position=start,
                                records_per_pass_max=passes[0], index_tags=True)
        for budget in passes * 1000:
            dispatcher.records_per_pass_max = budget
            notices.append(dict(dispatcher.dispatch(committed_position=end, min_position=0)))
            if dispatcher.caught_up:
                break
        state = (dispatcher.dispatched_position, list(dispatcher.damage),
                 dispatcher.damaged_ranges_total, dispatcher.queue_holes_total,
                 dispatcher.records_dispatched_total, dispatcher.last_store_timestamp_ms,
                 dispatcher.index_timestamp_ms, dict(dispatcher.stalled_queues), notices,
                 queues.next_offsets(), queues.max_physical_end)
    finally:
        index.close()
        queues.close()
        reader.close()
    return state


def store_files(directory: Path) -> dict[str, bytes]:
    """Queue files by path, index files in creation order (their names are clock times)."""
    queue_files = {str(path.relative_to(directory)): path.read_bytes()
                   for path in sorted((directory / volume.CONSUME_QUEUE_DIRECTORY).rglob("*"))
                   if path.is_file()}
    index_files = sorted((directory / volume.INDEX_DIRECTORY).iterdir())
    return queue_files | {f"index #{number}": path.read_bytes()
                          for number, path in enumerate(index_files)}
