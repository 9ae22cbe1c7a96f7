"""The writer's one produce core (services/writer/produce.py): a send that breaks a rule is
refused with the same status and reason whether it came over HTTP or was forwarded by the
remoting front, and neither door stores anything of it (issue 22, finding 4: the rules were
written once per door, and the doors disagreed)."""

from __future__ import annotations

from typing import Any

import pytest

from mqstore.services.common.links.forward_wire import KIND_SINGLE, ForwardRequest
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.app import PRODUCE, create_app
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.storage import MessageStore
from tests.services.serving import run, writer_client

SETTINGS = WriterSettings(forward_port=0, topic_queue_count=4)


def _forwarded(store: MessageStore, topic: str, queue_id: int, body: bytes) -> tuple[str, str]:
    server = ForwardServer(create_app(store, SETTINGS)[PRODUCE], SETTINGS)
    request = ForwardRequest(1, KIND_SINGLE, queue_id, 0, 0, 1_700_000_000_000, 0,
                             "10.0.0.1:5000", topic, b"", body)
    answer = run(lambda: server.store(request))
    return answer.status, answer.reason


def _over_http(store: MessageStore, topic: str, queue_id: int, body: bytes) -> tuple[str, str]:
    async def scenario() -> dict[str, Any]:
        async with writer_client(store, SETTINGS) as client:
            answer = await client.post(f"/v1/topics/{topic}/messages",
                                       json={"body": body.decode(), "queue_id": queue_id})
            document: dict[str, Any] = await answer.json()
            return document

    error = run(scenario)["error"]
    return error["status"], error["reason"]


@pytest.mark.parametrize(("topic", "queue_id", "body", "status", "named"), [
    ("Orders", 7, b"x", "MESSAGE_ILLEGAL", "queue_id=7 must be in 0..3 (topic_queue_count=4)"),
    ("Orders", 0, b"", "MESSAGE_ILLEGAL", "is empty"),
    ("Orders", 0, b"x" * (4 * 1024 * 1024 + 1), "MESSAGE_ILLEGAL",
     "message_body_size_bytes_max"),
    ("RMQ_SYS_TRANS_HALF_TOPIC", 0, b"x", "NO_PERMISSION", "RMQ_SYS_TRANS_HALF_TOPIC"),
    ("%DLQ%payments", 0, b"x", "NO_PERMISSION", "%DLQ%payments"),
])
def test_both_doors_refuse_alike_and_store_nothing(store: MessageStore, topic: str,
                                                   queue_id: int, body: bytes, status: str,
                                                   named: str) -> None:
    forwarded = _forwarded(store, topic, queue_id, body)
    over_http = _over_http(store, topic, queue_id, body)
    assert forwarded[0] == over_http[0] == status
    assert named in forwarded[1]
    assert forwarded[1].split(": ", 1)[-1] == over_http[1].split(": ", 1)[-1]
    assert store.committed_position == 0


def test_a_topic_over_the_stores_length_is_refused_by_both(store: MessageStore) -> None:
    topic = "T" * (store.config.topic_size_bytes_max + 1)
    for status, reason in (_forwarded(store, topic, 0, b"x"), _over_http(store, topic, 0, b"x")):
        assert status == "MESSAGE_ILLEGAL"
        assert str(store.config.topic_size_bytes_max) in reason
    assert store.committed_position == 0
