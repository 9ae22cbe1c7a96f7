"""Found 4: every new (topic, queue) wrote a full 6,000,000-byte consume queue file; one
4,410-byte batch naming 50 topics x 4 queues made 1.2 GB of files (measured on main:
1,200,128,000 bytes of blocks).  Now a file keeps its length (RocketMQ loads no other) but
holds one allocation step of blocks until its entries need more."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mqstore.services.common.http.batch_wire import BATCH_MEDIA_TYPE, BatchCodec, WireMessage
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.storage import MessageStore, StoreConfig
from tests.services.serving import run

TOPICS, QUEUES = 50, 4
BLOCK_BYTES = 512  # st_blocks counts 512-byte units
FILE_BYTES = 6_000_000  # RocketMQ's consume queue file size, as `mqstore up` uses it


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    config = StoreConfig.for_small_segments(1 << 20, consume_queue_file_size_bytes=FILE_BYTES)
    opened = MessageStore.open(tmp_path / "store", config)
    yield opened
    opened.close()


async def _post_batch(store: MessageStore) -> int:
    body = BatchCodec.encode(WireMessage(f"T{topic}", b"x", queue)
                             for topic in range(TOPICS) for queue in range(QUEUES))
    assert len(body) < 5000  # a few kilobytes
    async with TestClient(TestServer(create_app(store, WriterSettings()))) as client:
        answer = await client.post("/v1/batch", data=body,
                                   headers={"Content-Type": BATCH_MEDIA_TYPE})
        return answer.status


def _bytes_on_disk(directory: Path) -> int:
    return sum(os.stat(path).st_blocks * BLOCK_BYTES
               for path in directory.rglob("*") if path.is_file())


def test_a_small_batch_of_many_new_queues_costs_one_step_per_queue(
        store: MessageStore) -> None:
    assert run(lambda: _post_batch(store)) == 200
    assert store.wait_dispatched(timeout_ms=10_000)
    used = _bytes_on_disk(store.directory / "consumequeue")
    step = store.config.consume_queue_allocate_step_bytes
    assert used <= TOPICS * QUEUES * step  # 12.5 MiB at most; it was 1.2 GB
    assert used < 20 << 20
    files = list((store.directory / "consumequeue").rglob("0" * 20))
    assert len(files) == TOPICS * QUEUES
    assert {path.stat().st_size for path in files} == {FILE_BYTES}  # full length, sparse
