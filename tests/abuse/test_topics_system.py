"""Found 2 (the topic part): any client wrote TBW102, SCHEDULE_TOPIC_XXXX, %RETRY%... and
%DLQ%... topics.  Now a plain produce to a system topic is refused as RocketMQ refuses it
(NO_PERMISSION) on HTTP and on the remoting front's forward path, and writes nothing; a
consumer's send-back to its %RETRY% topic still goes through."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mqstore.services.common.links.forward_wire import KIND_SINGLE, ForwardRequest
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.notifier.remoting.codes import NO_PERMISSION
from mqstore.services.notifier.remoting.send import STATUS_CODES
from mqstore.services.writer.app import PRODUCE, create_app
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.storage import MessageStore, StoreConfig
from tests.services.serving import run

SYSTEM_TOPICS = ["TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC",
                 "%RETRY%group", "%DLQ%group"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    opened = MessageStore.open(tmp_path / "store", StoreConfig.for_small_segments(1 << 20))
    yield opened
    opened.close()


async def _post_each(store: MessageStore) -> list[tuple[int, Any]]:
    answers = []
    async with TestClient(TestServer(create_app(store, WriterSettings()))) as client:
        for topic in SYSTEM_TOPICS:
            answer = await client.post(f"/v1/topics/{topic}/messages", json={"body": "x"})
            answers.append((answer.status, await answer.json()))
    return answers


def test_http_produces_to_system_topics_are_refused(store: MessageStore) -> None:
    for status, answer in run(lambda: _post_each(store)):
        assert status == 403
        assert answer["error"]["status"] == "NO_PERMISSION"
    assert store.written_position == 0


def _forward(topic: str, properties: bytes) -> ForwardRequest:
    return ForwardRequest(0, KIND_SINGLE, 0, 0, 0, 1_700_000_000_000, 0, "10.0.0.1:5000",
                          topic, properties, b"body")


def test_remoting_sends_to_system_topics_are_refused_but_send_back_is_not(
        store: MessageStore) -> None:
    settings = WriterSettings(forward_port=0)
    server = ForwardServer(create_app(store, settings)[PRODUCE], settings)
    for topic in SYSTEM_TOPICS:
        answer = run(lambda topic=topic: server.store(_forward(topic, b"")))
        assert answer.status == "NO_PERMISSION", topic
        assert STATUS_CODES[answer.status] == NO_PERMISSION  # 16 with the reason as remark
        assert not answer.results
    assert store.written_position == 0
    # A push consumer's fallback when CONSUMER_SEND_MSG_BACK is not served: a send to its
    # retry topic naming the original topic in RETRY_TOPIC.
    send_back = b"RETRY_TOPIC\x01Orders\x02ORIGIN_MESSAGE_ID\x01AB\x02"
    answer = run(lambda: server.store(_forward("%RETRY%group", send_back)))
    assert answer.status == "PUT_OK"
