"""Found 4 (deletion): there was no way to delete a topic; a topic deleted through the
remoting front (DELETE_TOPIC_IN_BROKER marks it in config/topics.json) was still written by
every produce.  Now the writer, another process reading the same file, refuses it on HTTP
(404) and on the forward path (17) and writes nothing, until it is created again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mqstore.services.common.config_file import WriterSettings
from mqstore.services.common.forward_wire import KIND_SINGLE, ForwardRequest
from mqstore.services.remoting.codes import TOPIC_NOT_EXIST
from mqstore.services.remoting.send import STATUS_CODES
from mqstore.services.remoting.topics import TopicConfig, TopicTable
from mqstore.services.writer.app import HANDLERS, create_app
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.storage import Message, MessageStore, StoreConfig
from tests.services.serving import run


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    opened = MessageStore.open(tmp_path / "store", StoreConfig.for_small_segments(1 << 20))
    yield opened
    opened.close()


def _table(store: MessageStore) -> TopicTable:
    """The remoting front's table, as a notifier process keeps it on the same volume."""
    return TopicTable(store.directory, queue_count_max=8, topics_max=100,
                      on_disk=lambda: ["Orders"])


async def _post(store: MessageStore) -> tuple[int, Any]:
    async with TestClient(TestServer(create_app(store, WriterSettings()))) as client:
        answer = await client.post("/v1/topics/Orders/messages", json={"body": "x"})
        return answer.status, await answer.json()


def test_a_deleted_topic_is_refused_by_the_writer_until_created_again(
        store: MessageStore) -> None:
    assert store.put(Message("Orders", 0, b"before")).ok
    written = store.written_position
    _table(store).delete("Orders")  # DELETE_TOPIC_IN_BROKER (services/remoting/admin.py)
    status, answer = run(lambda: _post(store))
    assert status == 404
    assert answer["error"]["status"] == "TOPIC_NOT_EXIST"
    settings = WriterSettings(forward_port=0)
    server = ForwardServer(create_app(store, settings)[HANDLERS], settings)
    forwarded = run(lambda: server.store(ForwardRequest(
        0, KIND_SINGLE, 0, 0, 0, 1_700_000_000_000, 0, "10.0.0.1:5000", "Orders", b"", b"x")))
    assert STATUS_CODES[forwarded.status] == TOPIC_NOT_EXIST
    assert store.written_position == written  # nothing was written
    _table(store).create(TopicConfig("Orders", 4, 4, 6))  # UPDATE_AND_CREATE_TOPIC
    status, _ = run(lambda: _post(store))
    assert status == 200
