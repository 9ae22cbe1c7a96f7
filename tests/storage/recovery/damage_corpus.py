"""A child process that writes the damage matrix's corpus, then closes or crashes.

    python -m tests.storage.recovery.damage_corpus DIR MODE ENDING

MODE is `embedded` (one store) or `split` (a writer store and an indexer in this process);
ENDING is `clean` (close everything) or `crash` (exit without closing: abort markers stay,
the checkpoint is whatever was last written).  Every put is under sync flush, so each one
that returned PUT_OK is synced.  Prints one JSON line per message, then "done".
"""

from __future__ import annotations

import json
import os
import sys

from mqstore.storage import FlushMode, Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.conftest import small_config
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

TOPICS = ("Red", "Blue")
QUEUES = 3
MESSAGES = 420
"""With 64 KiB segments and bodies of 300-900 B: eight segments."""


def body_for(number: int) -> bytes:
    return f"body-{number}-".encode() + bytes([number % 251]) * (300 + number * 37 % 600)


def message_for(number: int) -> Message:
    return Message(TOPICS[number % 2], number % QUEUES, body_for(number),
                   keys=(f"key-{number}",), tags=("new", "old")[number % 2])


def main() -> None:
    directory, mode, ending = sys.argv[1:4]
    sync = {"flush_mode": FlushMode.SYNC}
    if mode == "embedded":
        store = MessageStore.open(directory, small_config(**sync))
        indexer = None
    else:
        store = MessageStore.open(directory, writer_config(**sync))
        indexer = Indexer.open(directory, indexer_config())
    for number in range(MESSAGES):
        result = store.put(message_for(number))
        assert result.ok, result
        print(json.dumps({"number": number, "position": result.physical_offset,
                          "size": result.size_bytes, "queue_offset": result.queue_offset}))
    if indexer is not None:
        wait_dispatched(indexer, store.committed_position)
    else:
        assert store.wait_dispatched(timeout_ms=20_000)
    print("done", flush=True)
    if ending == "crash":
        os._exit(0)
    store.close()
    if indexer is not None:
        indexer.close()


if __name__ == "__main__":
    main()
