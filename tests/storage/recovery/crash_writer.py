"""A writer process for the kill -9 test: produces under sync flush, prints each ack.

    python -m tests.storage.recovery.crash_writer DIR RUN_ID

Each acknowledged put prints "run producer sequence physical_offset queue_offset" on its
own line, only after the put returned PUT_OK (so after its bytes were synced).
"""

from __future__ import annotations

import sys
import threading

from mqstore.storage import FlushMode, Message, MessageStore
from tests.conftest import small_config

PRODUCERS = 4


def body_for(run: int, producer: int, sequence: int) -> bytes:
    stem = f"{run}:{producer}:{sequence}:".encode()
    return stem + bytes([(run + producer + sequence) % 256]) * (200 + sequence * 7 % 1500)


def key_for(run: int, producer: int, sequence: int) -> str:
    return f"k-{run}-{producer}-{sequence}"


def main() -> None:
    directory, run = sys.argv[1], int(sys.argv[2])
    store = MessageStore.open(directory, small_config(flush_mode=FlushMode.SYNC))
    print("ready", flush=True)
    out_lock = threading.Lock()

    def produce(producer: int) -> None:
        sequence = 0
        while True:
            result = store.put(Message("Crash", producer, body_for(run, producer, sequence),
                                       keys=(key_for(run, producer, sequence),)))
            if not result.ok:
                continue
            with out_lock:
                sys.stdout.write(f"{run} {producer} {sequence} {result.physical_offset} "
                                 f"{result.queue_offset}\n")
                sys.stdout.flush()
            sequence += 1

    threads = [threading.Thread(target=produce, args=(p,), daemon=True) for p in range(PRODUCERS)]
    for thread in threads:
        thread.start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
