"""Found 4: topic creation had no switch and no bound (one 4,410-byte batch named 50 new
topics x 4 queues).  Now the writer refuses a request whose new topics pass
`topics.topics_max`, or name a new topic with `topics.auto_create` off, whole: nothing is
written.  (What each new queue costs on disk: test_topics_sparse_queues.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mqstore.services.common.http.batch_wire import BATCH_MEDIA_TYPE, BatchCodec, WireMessage
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.common.settings.topics import TopicsSettings
from mqstore.services.writer import create_app
from mqstore.storage import MessageStore, StoreConfig
from tests.services.serving import run

TOPICS, QUEUES = 50, 4


def _config() -> StoreConfig:
    # RocketMQ's consume queue file size, as `mqstore up` uses it: what made 1.2 GB.
    return StoreConfig.for_small_segments(1 << 20, consume_queue_file_size_bytes=6_000_000)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    opened = MessageStore.open(tmp_path / "store", _config())
    yield opened
    opened.close()


def _batch() -> bytes:
    body = BatchCodec.encode(WireMessage(f"T{topic}", b"x", queue)
                             for topic in range(TOPICS) for queue in range(QUEUES))
    assert len(body) < 5000  # a few kilobytes
    return body


async def _post(store: MessageStore, topics: TopicsSettings) -> tuple[int, Any]:
    app = create_app(store, WriterSettings(), topics=topics)
    async with TestClient(TestServer(app)) as client:
        answer = await client.post("/v1/batch", data=_batch(),
                                   headers={"Content-Type": BATCH_MEDIA_TYPE})
        return answer.status, await answer.json()


def test_a_batch_past_topics_max_is_refused_whole_and_writes_nothing(
        store: MessageStore) -> None:
    status, answer = run(lambda: _post(store, TopicsSettings(topics_max=TOPICS - 1)))
    assert status == 404
    assert answer["error"]["status"] == "TOPIC_NOT_EXIST"
    assert "topics_max" in answer["error"]["reason"]
    assert store.written_position == 0
    assert not (store.directory / "consumequeue").exists()


def test_auto_create_off_refuses_new_topics_and_writes_nothing(store: MessageStore) -> None:
    status, answer = run(lambda: _post(store, TopicsSettings(auto_create=False)))
    assert status == 404
    assert answer["error"]["status"] == "TOPIC_NOT_EXIST"
    assert "auto_create" in answer["error"]["reason"]
    assert store.written_position == 0
