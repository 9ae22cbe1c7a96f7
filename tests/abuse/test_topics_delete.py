"""Found 4 (deletion): there was no way to delete a topic; a topic deleted through the
remoting front (DELETE_TOPIC_IN_BROKER marks it in config/topics.json) was still written by
every produce, and HTTP could neither create nor delete one.  Now the notifier owns the
topic table (PUT and DELETE /v1/topics/{topic}, and the remoting front), and the writer,
another process reading the same file, refuses a deleted topic on HTTP (404) and on the
forward path (17) and writes nothing, until it is created again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mqstore.services.common.links.forward_wire import KIND_SINGLE, ForwardRequest
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.common.settings.topics import TopicsSettings
from mqstore.services.notifier.remoting.codes import TOPIC_NOT_EXIST
from mqstore.services.notifier.remoting.send import STATUS_CODES
from mqstore.services.notifier.remoting.topics import TopicConfig, TopicTable
from mqstore.services.writer.app import PRODUCE, create_app
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.storage import Message, MessageStore, StoreConfig
from tests.services.notifier_stack import notifier_app, settings
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import writer_config


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    opened = MessageStore.open(tmp_path / "store", StoreConfig.for_small_segments(1 << 20))
    yield opened
    opened.close()


def _table(store: MessageStore) -> TopicTable:
    """The remoting front's table, as a notifier process keeps it on the same volume."""
    return TopicTable(store.directory, queue_count_max=8, topics_max=100,
                      topic_size_bytes_max=store.config.topic_size_bytes_max,
                      on_disk=lambda: {"Orders"})


async def _post(store: MessageStore) -> tuple[int, Any]:
    async with TestClient(TestServer(create_app(store, WriterSettings()))) as client:
        answer = await client.post("/v1/topics/Orders/messages", json={"body": "x"})
        return answer.status, await answer.json()


def test_a_deleted_topic_is_refused_by_the_writer_until_created_again(
        store: MessageStore) -> None:
    assert store.put(Message("Orders", 0, b"before")).ok
    written = store.written_position
    _table(store).delete("Orders")  # DELETE_TOPIC_IN_BROKER (services/notifier/remoting/admin.py)
    status, answer = run(lambda: _post(store))
    assert status == 404
    assert answer["error"]["status"] == "TOPIC_NOT_EXIST"
    settings = WriterSettings(forward_port=0)
    server = ForwardServer(create_app(store, settings)[PRODUCE], settings)
    forwarded = run(lambda: server.store(ForwardRequest(
        0, KIND_SINGLE, 0, 0, 0, 1_700_000_000_000, 0, "10.0.0.1:5000", "Orders", b"", b"x")))
    assert STATUS_CODES[forwarded.status] == TOPIC_NOT_EXIST
    assert store.written_position == written  # nothing was written
    _table(store).create(TopicConfig("Orders", 4, 4, 6))  # UPDATE_AND_CREATE_TOPIC
    status, _ = run(lambda: _post(store))
    assert status == 200


def test_http_create_and_delete_through_the_notifier_bind_the_writer(tmp_path: Path) -> None:
    """The split deployment: a writer (auto_create off) and a notifier on one volume,
    sharing nothing but its files."""
    directory = tmp_path / "volume"
    writer = MessageStore.open(directory, writer_config())
    try:
        assert writer.put(Message("Seed", 0, b"x")).ok  # the view needs a published log
        run(lambda: _split(writer, directory))
    finally:
        writer.close()


async def _split(writer: MessageStore, directory: Path) -> None:
    writer_app = create_app(writer, WriterSettings(), topics=TopicsSettings(
        auto_create=False, topics_file_check_interval_ms=0))  # no wait between the steps
    async with TestClient(TestServer(writer_app)) as producer, \
            notifier_app(directory, settings()) as (admin, _, _):
        async def produce() -> int:
            answer = await producer.post("/v1/topics/Orders/messages", json={"body": "x"})
            return answer.status

        assert await produce() == 404  # auto_create off: not created yet
        created = await admin.put("/v1/topics/Orders")
        assert (created.status, await created.json()) == (
            200, {"topic": "Orders", "queue_count": 8})
        assert await produce() == 200
        assert "Orders" in (await (await admin.get("/v1/topics")).json())["topics"]
        deleted = await admin.delete("/v1/topics/Orders")
        assert (deleted.status, await deleted.json()) == (
            200, {"topic": "Orders", "deleted": True})
        written = writer.written_position
        assert await produce() == 404
        assert writer.written_position == written
        assert "Orders" not in (await (await admin.get("/v1/topics")).json())["topics"]
        # Nothing that never existed is recorded, and system topics are not the client's.
        assert (await admin.delete("/v1/topics/Nobody")).status == 404
        assert (await admin.delete("/v1/topics/TBW102")).status == 404
        assert (await admin.put("/v1/topics/SCHEDULE_TOPIC_XXXX")).status == 403


def test_a_deleted_topic_with_data_still_counts_against_topics_max(
        store: MessageStore) -> None:
    """Its queue files stay on the volume: create-delete cycles must not grow it unbounded."""
    assert store.put(Message("Orders", 0, b"kept")).ok
    _table(store).delete("Orders")

    async def post(topic: str) -> int:
        app = create_app(store, WriterSettings(), topics=TopicsSettings(topics_max=1))
        async with TestClient(TestServer(app)) as client:
            answer = await client.post(f"/v1/topics/{topic}/messages", json={"body": "x"})
            return answer.status

    assert run(lambda: post("Other")) == 404
