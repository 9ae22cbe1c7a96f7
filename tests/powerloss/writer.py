"""The power-loss writer: opens the store on the lossyfs mount and puts until it is killed.

    python -c <bootstrap> VARIANT STORE_DIR ACK_PATH POSITIONS_PATH CYCLE SEED PUT_RATE_PER_S

(`tests.processes.module_command("tests.powerloss.writer")` builds the command.)  Prints one
line, "opened <recovery report as JSON>", once the store is open, then appends every
acknowledged message to ACK_PATH (workload.AckLog):

- sync flush: a put (or each message of a put_batch) answered PUT_OK, which means synced;
- async flush: PUT_OK only means written, so a message is recorded once the store reports a
  `flushed_position` at or past its end, read after the put returned (`FlushedAcks` polls).

Producers mix `put` and `put_batch` over several topics and queues, paced to PUT_RATE_PER_S
in total so that the verifier's work stays bounded.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mqstore.storage import MessageStore, PutResult
from tests.powerloss.report import recovery_fields
from tests.powerloss.workload import (
    QUEUE_COUNT,
    TOPICS,
    VARIANTS_BY_NAME,
    Ack,
    AckLog,
    message_for,
)

PRODUCER_COUNT = 3
"""Concurrent producers: under sync flush they share group commits."""
BATCH_SHARE = 0.3
"""Share of the producers' calls that are put_batch (of BATCH_SIZE_MIN..MAX messages)."""
BATCH_SIZE_MIN = 2
BATCH_SIZE_MAX = 8
FLUSH_POLL_INTERVAL_S = 0.002
"""Async flush: how often FlushedAcks reads the store's flushed position."""
POSITIONS_INTERVAL_S = 0.02
"""How often the written and flushed positions are appended to POSITIONS_PATH."""

Recorder = Callable[[list[Ack]], None]


class FlushedAcks:
    """Async flush: acknowledges a PUT_OK message only when a flushed position read after its
    put returned covers its end."""

    def __init__(self, store: MessageStore, log: AckLog) -> None:
        self._store = store
        self._log = log
        self._pending: list[Ack] = []
        self._lock = threading.Lock()

    def add(self, acks: list[Ack]) -> None:
        with self._lock:
            self._pending.extend(acks)

    def run(self) -> None:
        while True:
            with self._lock:
                taken, self._pending = self._pending, []
            flushed = self._store.flushed_position  # read after every taken put returned
            synced = [ack for ack in taken if ack.end_position <= flushed]
            self._log.record(synced)
            if len(synced) < len(taken):
                with self._lock:
                    self._pending.extend(ack for ack in taken if ack.end_position > flushed)
            time.sleep(FLUSH_POLL_INTERVAL_S)


def report_positions(store: MessageStore, path: Path) -> None:
    """Appends "written flushed" every POSITIONS_INTERVAL_S: the parent compares the last
    line before the cut with the end recovery finds (unsynced bytes must go, synced stay)."""
    with open(path, "a", buffering=1) as positions:
        while True:
            positions.write(f"{store.written_position} {store.flushed_position}\n")
            positions.flush()
            time.sleep(POSITIONS_INTERVAL_S)


def produce(store: MessageStore, cycle: int, sequences: itertools.count[int],
            rng: random.Random, rate_per_s: float, record: Recorder) -> None:
    started = time.monotonic()
    put_count = 0
    while True:
        size = rng.randint(BATCH_SIZE_MIN, BATCH_SIZE_MAX) if rng.random() < BATCH_SHARE else 1
        planned = [(next(sequences), rng.choice(TOPICS), rng.randrange(QUEUE_COUNT))
                   for _ in range(size)]
        messages = [message_for(cycle, *plan) for plan in planned]
        results: list[PutResult] = (store.put_batch(messages) if size > 1
                                    else [store.put(messages[0])])
        record([Ack(cycle, sequence, topic, queue_id, result.queue_offset,
                    result.physical_offset, result.size_bytes)
                for (sequence, topic, queue_id), result in zip(planned, results, strict=True)
                if result.ok])
        put_count += size
        ahead_s = put_count / rate_per_s - (time.monotonic() - started)
        if ahead_s > 0:
            time.sleep(ahead_s)


def main() -> None:
    variant_name, store_dir, ack_path, positions_path = sys.argv[1:5]
    cycle_text, seed_text, rate_text = sys.argv[5:8]
    variant = VARIANTS_BY_NAME[variant_name]
    cycle, seed, rate_per_s = int(cycle_text), int(seed_text), float(rate_text)
    store = MessageStore.open(store_dir, variant.store_config())
    print("opened " + json.dumps(recovery_fields(store.recovery_report)), flush=True)
    log = AckLog(Path(ack_path))
    record: Recorder = log.record
    if not variant.store_config().flush_sync:
        flushed = FlushedAcks(store, log)
        record = flushed.add
        threading.Thread(target=flushed.run, name="flushed-acks", daemon=True).start()
    threading.Thread(target=report_positions, name="positions", daemon=True,
                     args=(store, Path(positions_path))).start()
    sequences = itertools.count()
    for index in range(PRODUCER_COUNT):
        threading.Thread(target=produce, name=f"producer-{index}", daemon=True,
                         args=(store, cycle, sequences, random.Random(seed * 1000 + index),
                               rate_per_s / PRODUCER_COUNT, record)).start()
    threading.Event().wait()  # until the power cut and kill -9


if __name__ == "__main__":
    main()
