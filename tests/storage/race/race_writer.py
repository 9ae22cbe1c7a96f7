"""A writer process for the race kill -9 test: appends under sync flush with 4 KiB-aligned
group commits, prints each acknowledged offset.

    python -m tests.storage.race.race_writer DIR RUN_ID

Each `append` that returned prints "run producer sequence queue_id offset" on its own line,
only after it returned (so after its bytes were synced).  Producers share the queues, so
concurrent appenders land in the same groups and the same queues.
"""

from __future__ import annotations

import sys
import threading

from mqstore.storage import AppendError, FlushMode, StoreConfig
from mqstore.storage.race import RaceStore
from tests.conftest import small_config

PRODUCERS = 6
QUEUES = 3
TOPIC = "Race"


def race_config() -> StoreConfig:
    return small_config(flush_mode=FlushMode.SYNC, group_commit_align_bytes=4096)


def body_for(run: int, producer: int, sequence: int) -> bytes:
    stem = f"{run}:{producer}:{sequence}:".encode()
    return stem + bytes([(run * 7 + producer + sequence) % 256]) * (100 + sequence * 131 % 3000)


def main() -> None:
    directory, run = sys.argv[1], int(sys.argv[2])
    store = RaceStore.open(directory, race_config())
    print("ready", flush=True)
    out_lock = threading.Lock()

    def produce(producer: int) -> None:
        sequence = 0
        while True:
            queue_id = (producer + sequence) % QUEUES
            try:
                offset = store.append(TOPIC, queue_id, body_for(run, producer, sequence))
            except AppendError:
                continue
            with out_lock:
                sys.stdout.write(f"{run} {producer} {sequence} {queue_id} {offset}\n")
                sys.stdout.flush()
            sequence += 1

    for producer in range(PRODUCERS):
        threading.Thread(target=produce, args=(producer,), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
