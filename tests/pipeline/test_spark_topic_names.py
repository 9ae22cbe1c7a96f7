"""The Spark data source reads a store of topics of every legal length (1..255 bytes, V1 and
V2 records, every legal character): the same store the engine's fuzz checks
(tests/storage/topic_names.py), row for row, and filters by the longest topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mqstore.storage import MessageStore
from tests.storage.topic_names import boundary_topics, config, put_messages, wait_dispatched


def test_the_source_reads_every_topic_length(spark: Any, tmp_path: Path) -> None:
    directory = tmp_path / "store"
    topics = boundary_topics()
    with MessageStore.open(directory, config()) as store:
        sent = put_messages(store, topics, seed=26, per_queue_max=12)
        wait_dispatched(store)
    want = sorted((m.physical_offset, m.topic, m.queue_id, m.queue_offset, m.body, [m.key])
                  for m in sent)
    rows = spark.read.format("mqstore").load(str(directory)).orderBy("physical_offset") \
        .select("physical_offset", "topic", "queue_id", "queue_offset", "body", "keys").collect()
    assert [(r.physical_offset, r.topic, r.queue_id, r.queue_offset, bytes(r.body), r.keys)
            for r in rows] == want
    longest = topics[-1]
    assert len(longest) == 255
    only = spark.read.format("mqstore").option("topics", longest).load(str(directory))
    assert sorted(r.physical_offset for r in only.select("physical_offset").collect()) == \
        [m.physical_offset for m in sorted(sent, key=lambda m: m.physical_offset)
         if m.topic == longest]
