"""`POST /v1/groups/{group}/nacks` refuses what it cannot do with a clear error and stores
nothing (services/notifier/nacks.py); the copies themselves: tests/services/test_nacks.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.services.notifier_stack import notifier_app, settings
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config


@pytest.fixture
def orders(store_dir: Path) -> Path:
    """Two messages in Orders/0, dispatched; nobody writes afterwards."""
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        for n in range(2):
            assert writer.put(Message("Orders", 0, f"o{n}".encode())).ok
        wait_dispatched(indexer, writer.committed_position)
    return store_dir


def _nack(store_dir: Path, body: Any, group: str = "billing") -> tuple[int, dict[str, Any]]:
    async def scenario() -> tuple[int, dict[str, Any]]:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            answer = await client.post(f"/v1/groups/{group}/nacks", json=body)
            return answer.status, await answer.json()

    return run(scenario)


@pytest.mark.parametrize(("body", "status", "reason"), [
    ({"queue_id": 0, "queue_offset": 0}, 400, "topic is required"),
    ({"topic": "Orders", "queue_id": 0}, 400, "queue_id and queue_offset are required"),
    ({"topic": "Orders", "queue_id": 0, "queue_offset": -1}, 400, "queue_offset must be"),
    ({"topic": "Orders", "queue_id": 0, "queue_offset": 0, "delay_level": -2}, 400,
     "delay_level must be"),
    ({"topic": "Orders", "queue_id": 0, "queue_offset": 0, "max_reconsume_times": "3"}, 400,
     "max_reconsume_times must be an integer"),
    ({"topic": "Orders", "queue_id": 0, "queue_offset": 0, "why": "x"}, 400, "why"),
    ({"topic": "SCHEDULE_TOPIC_XXXX", "queue_id": 0, "queue_offset": 0}, 400,
     "is a system topic"),
    ({"topic": "Orders", "queue_id": 0, "queue_offset": 2}, 404, "no message at offset 2"),
    ({"topic": "Orders", "queue_id": 5, "queue_offset": 0}, 404, "no message at offset 0"),
    ({"topic": "Orders", "queue_id": 0, "queue_offset": 1}, 503, "no link to the writer"),
])
def test_a_nack_it_cannot_serve_is_refused_with_its_reason(
        orders: Path, body: Any, status: int, reason: str) -> None:
    answered, document = _nack(orders, body)
    assert (answered, reason in document["error"]["reason"]) == (status, True), document


def test_a_group_whose_retry_topic_would_be_too_long_is_refused(orders: Path) -> None:
    group = "g" * 125  # a valid group name; "%RETRY%" + it passes the topic limit (127)
    answered, document = _nack(orders, {"topic": "Orders", "queue_id": 0, "queue_offset": 0},
                               group=group)
    assert answered == 400
    assert "%RETRY%" in document["error"]["reason"]
