"""GET /v1/broker and PUT /v1/broker/permission: the permission goes through the same file as
mqadmin updateBrokerConfig, so the remoting front's topic table serves it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mqstore.services.notifier.remoting.topics import (
    PERM_READ_WRITE,
    TopicTable,
    broker_permission,
)
from mqstore.storage import MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.broker_properties import BrokerPropertiesFile
from tests.services.notifier_stack import notifier_app, settings
from tests.storage.dispatch.split_helpers import indexer_config, writer_config

JSON = {"Content-Type": "application/json"}


def _empty_store(store_dir: Path) -> Path:
    with MessageStore.open(store_dir, writer_config()), \
            Indexer.open(store_dir, indexer_config()):
        pass
    return store_dir


def test_the_permission_is_read_and_written_through_the_broker_properties(
        tmp_path: Path) -> None:
    store_dir = _empty_store(tmp_path / "store")

    async def scenario() -> list[Any]:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            before = await (await client.get("/v1/broker")).json()
            put = await client.put("/v1/broker/permission", json={"permission": 4})
            after = await (await client.get("/v1/broker")).json()
            return [before, put.status, await put.json(), after]

    before, status, answer, after = asyncio.run(scenario())
    assert before == {"cluster_name": "DefaultCluster", "broker_name": "mqstore",
                      "permission": PERM_READ_WRITE}
    assert status == 200
    assert answer["permission"] == after["permission"] == 4
    assert BrokerPropertiesFile(store_dir).read() == {"brokerPermission": "4"}
    assert broker_permission(BrokerPropertiesFile(store_dir).read()) == 4
    table = TopicTable(store_dir, queue_count_max=8, topics_max=100,
                       topic_size_bytes_max=127, on_disk=frozenset)
    assert table.broker_permission == 4


def test_a_bad_permission_is_refused_with_a_reason_and_changes_nothing(
        tmp_path: Path) -> None:
    store_dir = _empty_store(tmp_path / "store")
    bodies: list[Any] = [{"permission": 8}, {"permission": -1}, {"permission": "4"}, {},
                         {"permission": 4, "other": 1}, [4]]

    async def scenario() -> list[tuple[int, str]]:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            answers = []
            for body in bodies:
                response = await client.put("/v1/broker/permission", json=body)
                answers.append((response.status, (await response.json())["error"]["reason"]))
            response = await client.put("/v1/broker/permission", data=b"4")
            answers.append((response.status, ""))
            return answers

    answers = asyncio.run(scenario())
    assert [status for status, _ in answers] == [400] * len(bodies) + [415]
    assert "permission" in answers[0][1]
    assert "unknown field" in answers[4][1]
    assert not (store_dir / "config" / "broker.properties").exists()
