"""One local Spark session for every pipeline test, and stores written through the engine.

The session is session-scoped: starting a JVM and the first Python data source query cost
about 15 s on this 2-core machine, every later query a fraction of a second.  `local[2]`, the
UI off (no port clashes between parallel runs), two shuffle partitions.  Java missing is a
failure, not a skip: the project's setup installs it.

Most tests do not need Spark at all (decoding, planning, offsets): they import no session.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore, StoreConfig, StoredMessage

SEGMENT_BYTES = 64 * 1024
TOPICS = ("Orders", "Payments", "Logs")


def store_config(**overrides: object) -> StoreConfig:
    return StoreConfig.for_small_segments(SEGMENT_BYTES, **overrides)


def sample_messages(count: int, *, first: int = 0) -> list[Message]:
    """Varied messages: three topics, four queues, tags, keys, properties, empty and
    multi-KiB bodies, and some born on an IPv6 host (another record layout)."""
    messages = []
    for number in range(first, first + count):
        topic = TOPICS[number % len(TOPICS)]
        body = bytes((number + i) % 256 for i in range(number % 7 * 300))
        tags = f"tag{number % 5}" if number % 4 else None
        keys = (f"key-{number}", f"alt-{number % 11}") if number % 3 else ()
        properties = {"source": f"s{number % 2}", "trace": "é-ü"} if number % 6 == 0 else None
        born_host = "[2001:db8::7]:4242" if number % 9 == 0 else None
        messages.append(Message(topic, number % 4, body, tags, keys, properties,
                                flag=number % 3, born_host=born_host))
    return messages


def write_store(directory: Path, messages: list[Message], *,
                config: StoreConfig | None = None) -> list[StoredMessage]:
    """Append `messages` through the engine (batches of 10); return everything stored."""
    with MessageStore.open(directory, config or store_config()) as store:
        for first in range(0, len(messages), 10):
            results = store.put_batch(messages[first:first + 10])
            assert all(result.ok for result in results), results[0]
        stored = list(store.iter_messages())
    for message in stored:
        message.body = bytes(message.body)
    return stored


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    assert shutil.which("java") is not None, "Java is required (scripts/setup.sh installs it)"
    from mqstore.pipeline.session import build_session  # noqa: PLC0415 (pyspark when used)

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = build_session(app_name="mqstore-tests", master="local[2]", conf={
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.sql.session.timeZone": "UTC",
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def written_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[StoredMessage]]:
    """A store of 900 messages over several 64 KiB segments, closed: read-only for tests."""
    directory = tmp_path_factory.mktemp("pipeline") / "store"
    stored = write_store(directory, sample_messages(900))
    assert len(stored) == 900
    return directory, stored
