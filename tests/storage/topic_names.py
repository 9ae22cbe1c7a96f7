"""Topic names of every legal length (1..255) and character, and a store of them to check.

Shared by the engine's fuzz (tests/storage/test_topic_names_fuzz.py) and the Spark reader's
test of the same store (tests/pipeline/test_spark_topic_names.py).  RocketMQ 5 allows topics
of 255 bytes; past 127 a record is V2 (2-byte topic length, storage/format/record.py).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from mqstore.storage import GetStatus, Message, MessageStore, StoreConfig
from mqstore.storage.format.record import MAGIC_V1, MAGIC_V2, TOPIC_LENGTH_V1_MAX
from mqstore.storage.format.topic import LEGAL_TOPIC_CHARACTERS
from tests.conftest import small_config

TOPIC_SIZE_BYTES_MAX = 255
BOUNDARY_LENGTHS = (1, 2, 126, 127, 128, 129, 200, 254, 255)
"""Around the V1/V2 switch (127/128) and the longest topic (255)."""
QUEUE_COUNT = 2
CONSUME_QUEUE_ENTRIES_PER_FILE = 8
"""Small consume queue files: every queue of a few dozen messages needs several, and each
new file is prepared under its name in creating/ (300 bytes for a 255-byte topic before
issue 26's fix)."""


def config(**overrides: object) -> StoreConfig:
    return small_config(topic_size_bytes_max=TOPIC_SIZE_BYTES_MAX,
                        consume_queue_file_size_bytes=CONSUME_QUEUE_ENTRIES_PER_FILE * 20,
                        **overrides)


def every_character_topic(length: int, *, seed: int = 0) -> str:
    """A topic of `length` bytes; from 66 bytes on it holds every legal character."""
    alphabet = list(LEGAL_TOPIC_CHARACTERS)
    random.Random(seed).shuffle(alphabet)
    return ("".join(alphabet) * (length // len(alphabet) + 1))[:length]


def boundary_topics() -> list[str]:
    return [every_character_topic(length, seed=length) for length in BOUNDARY_LENGTHS]


@dataclass(frozen=True)
class Sent:
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    key: str
    body: bytes


def put_messages(store: MessageStore, topics: list[str], *, seed: int, per_queue_max: int,
                 body_bytes_max: int = 600) -> list[Sent]:
    """1..per_queue_max messages in each queue of each topic, interleaved at random, each
    with its own key; some puts are batches of several topics."""
    rng = random.Random(seed)
    pending = [(topic_index, queue_id) for topic_index in range(len(topics))
               for queue_id in range(QUEUE_COUNT)
               for _ in range(rng.randint(1, per_queue_max))]
    rng.shuffle(pending)
    sent: list[Sent] = []
    while pending:
        batch = pending[:rng.choice((1, 1, 4))]
        pending = pending[len(batch):]
        messages = [Message(topics[t], q, rng.randbytes(rng.randint(1, body_bytes_max)),
                            tags=f"tag{t}", keys=(f"key-{seed}-{t}-{q}-{len(sent) + i}",))
                    for i, (t, q) in enumerate(batch)]
        results = store.put_batch(messages) if len(messages) > 1 else [store.put(messages[0])]
        for message, result in zip(messages, results, strict=True):
            assert result.ok, (len(message.topic), result)
            sent.append(Sent(message.topic, message.queue_id, result.queue_offset,
                             result.physical_offset, message.keys[0], message.body))
    return sent


def by_queue(sent: list[Sent]) -> dict[tuple[str, int], list[Sent]]:
    queues: dict[tuple[str, int], list[Sent]] = {}
    for message in sorted(sent, key=lambda m: m.physical_offset):
        queues.setdefault((message.topic, message.queue_id), []).append(message)
    return queues


def read_queue(store: MessageStore, topic: str, queue_id: int,
               offset: int) -> list[tuple[int, int, bytes]]:
    """(queue offset, physical offset, body) of every message from `offset` on; also checks
    each record's topic and magic (V2 exactly past 127 bytes)."""
    magic = MAGIC_V2 if len(topic.encode()) > TOPIC_LENGTH_V1_MAX else MAGIC_V1
    found: list[tuple[int, int, bytes]] = []
    while True:
        with store.get(topic, queue_id, offset, 32) as result:
            if result.status is not GetStatus.FOUND:
                assert result.status is GetStatus.OFFSET_OVERFLOW_ONE, (len(topic), result)
                return found
            for message in result.messages:
                assert (message.topic, message.queue_id, message.magic) == (
                    topic, queue_id, magic)
                found.append((message.queue_offset, message.physical_offset,
                              bytes(message.body)))
            offset = result.next_offset


def check_store(store: MessageStore, sent: list[Sent], *, min_position: int = 0,
                check_min_offsets: bool = True) -> None:
    """Every queue holds its messages at or above `min_position`, in order, and starts at
    the first of them (unless not `check_min_offsets`); the index finds each of those by key
    and none below it; no queue is stalled."""
    assert store.dispatch_stalled_queues == []
    for (topic, queue_id), messages in by_queue(sent).items():
        kept = [m for m in messages if m.physical_offset >= min_position]
        first = len(messages) - len(kept)
        if check_min_offsets:
            assert store.min_offset(topic, queue_id) == first, (len(topic), queue_id)
        assert store.max_offset(topic, queue_id) == len(messages), (len(topic), queue_id)
        assert read_queue(store, topic, queue_id, first) == [
            (m.queue_offset, m.physical_offset, m.body) for m in kept], (len(topic), queue_id)
    for message in sent:
        found = [m.physical_offset for m in store.query_by_key(message.topic, message.key)]
        want = [message.physical_offset] if message.physical_offset >= min_position else []
        assert found == want, (len(message.topic), message.key)


def wait_dispatched(store: MessageStore, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while store.dispatch_behind_bytes:
        assert time.monotonic() < deadline, (
            f"dispatch stuck {store.dispatch_behind_bytes} bytes behind: "
            f"{store.dispatch_stalled_reason} {store.dispatch_stalled_queues}")
        time.sleep(0.002)
