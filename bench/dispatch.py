"""What dispatch costs per message: the consume queue entry and the index keys, from the log.

    .venv/bin/python bench/dispatch.py [--messages 50000] [--runs 3] [--dir DIR]

Writes N messages of 1 KiB into a store with dispatch off, in two shapes and two kinds:

* shapes: `single` -- each message to the next of 4 queues in turn, as single sends from a
  RocketMQ producer land; `batch` -- 256 messages to one queue, then the next;
* kinds: `rocketmq` -- tags and a unique key (`UNIQ_KEY`), as every message a RocketMQ
  client sends carries, so each makes a consume queue entry and two index keys; `plain` --
  no properties, a consume queue entry only.

Then, timed, a `Dispatcher` builds the consume queues and the index from the log over fresh
directories, in passes of 1,024 records (the indexer's default).  The figure is the
dispatching thread's CPU time per message (`time.thread_time`), median of `--runs`; the
first index file and the queue files are created before the clock starts, so it is the
per-message work and not the files' preallocation.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from mqstore.storage import Message, MessageStore, StoreConfig
from mqstore.storage.dispatch.dispatcher import Dispatcher
from mqstore.storage.format import volume
from mqstore.storage.index.index_service import IndexService
from mqstore.storage.log.reader import CommitLogReader
from mqstore.storage.queues.consume_queues import ConsumeQueues

BODY = bytes(range(256)) * 4
TOPIC = "BenchTopic"
QUEUES = 4
BATCH_MESSAGES = 256
PASS_RECORDS = 1024
CONFIG = StoreConfig(dispatch_enabled=False)


def write_log(directory: Path, count: int, *, shape: str, kind: str) -> int:
    """The log's committed end after `count` messages."""
    store = MessageStore.open(directory, CONFIG)
    try:
        for number in range(count):
            queue_id = number % QUEUES if shape == "single" else \
                number // BATCH_MESSAGES % QUEUES
            store.put(Message(TOPIC, queue_id, BODY, tags="TagA",
                              properties={"UNIQ_KEY": uuid.uuid4().hex.upper()})
                      if kind == "rocketmq" else Message(TOPIC, queue_id, BODY))
        return store.committed_position
    finally:
        store.close()


def dispatch_us(directory: Path, end: int) -> float:
    """Thread CPU µs per message of dispatching [0, end) over fresh queues and index."""
    for built in (volume.CONSUME_QUEUE_DIRECTORY, volume.INDEX_DIRECTORY):
        shutil.rmtree(directory / built, ignore_errors=True)
    reader = CommitLogReader(directory / volume.COMMITLOG_DIRECTORY,
                             segment_size_bytes=CONFIG.segment_size_bytes)
    queues = ConsumeQueues(directory, file_size_bytes=CONFIG.consume_queue_file_size_bytes,
                           allocate_step_bytes=CONFIG.consume_queue_allocate_step_bytes)
    index = IndexService(directory=directory / volume.INDEX_DIRECTORY,
                         hash_slot_count=CONFIG.index_hash_slot_count,
                         index_count_max=CONFIG.index_count_max,
                         query_results_max=CONFIG.index_query_results_max)
    queues.load()
    index.load(abnormal=False, index_timestamp_ms=0)
    try:
        dispatcher = Dispatcher(reader, queues, index=index, dispatched_position=0,
                                records_per_pass_max=QUEUES * BATCH_MESSAGES + 1)
        dispatcher.dispatch(committed_position=end, min_position=0)  # creates the files
        dispatcher.records_per_pass_max = PASS_RECORDS
        before = dispatcher.records_dispatched_total
        started = time.thread_time()
        while dispatcher.dispatched_position < end:
            dispatcher.dispatch(committed_position=end, min_position=0)
        elapsed = time.thread_time() - started
        return elapsed / (dispatcher.records_dispatched_total - before) * 1e6
    finally:
        index.close()
        queues.close()
        reader.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    arguments = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mqstore-dispatch-", dir=arguments.dir))
    try:
        for kind in ("rocketmq", "plain"):
            for shape in ("single", "batch"):
                directory = root / f"{kind}-{shape}"
                end = write_log(directory, arguments.messages, shape=shape, kind=kind)
                runs = [dispatch_us(directory, end) for _ in range(arguments.runs)]
                listed = ", ".join(f"{run:.2f}" for run in runs)
                print(f"{kind:8} {shape:6} dispatch {statistics.median(runs):6.2f} µs a "
                      f"message  (runs {listed})")
                shutil.rmtree(directory)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
