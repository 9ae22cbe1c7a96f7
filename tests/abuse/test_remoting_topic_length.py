"""The remoting front checks topic names by the store's `topic_size_bytes_max` (issue 22,
Found 4): it allowed 255 bytes whatever the store's limit (127 by default), so a 200-byte topic
was auto-created and routed but could never be written."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.storage import StoreConfig
from tests.remoting.client import send_header
from tests.remoting.fronts import front_over

PEER = Peer("10.0.0.9:50000", 1)


@pytest.fixture(params=[127, 255], ids=lambda size: f"store-limit-{size}")
def front(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Front]:
    config = StoreConfig(store_host="127.0.0.1:9876", topic_size_bytes_max=request.param)
    with front_over(tmp_path, config=config) as served:
        yield served


def ask(front: Front, code: int, ext: dict[str, str], body: bytes = b"") -> Command:
    answer = asyncio.run(answer_to(front, Command(code, 11, 0, ext, body), PEER))
    assert answer is not None
    return answer


def test_a_topic_longer_than_the_store_takes_is_refused_and_not_created(front: Front) -> None:
    limit = front.store_config.topic_size_bytes_max
    too_long, longest = "T" * (limit + 1), "L" * limit
    if limit < 255:
        sent = ask(front, codes.SEND_MESSAGE_V2, send_header(too_long, 0), b"body")
        assert sent.code == codes.MESSAGE_ILLEGAL
        assert "topic_size_bytes_max" in (sent.remark or "")
        created = ask(front, codes.UPDATE_AND_CREATE_TOPIC, {
            "topic": too_long, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"})
        assert created.code == codes.MESSAGE_ILLEGAL
        assert ask(front, codes.GET_ROUTEINFO_BY_TOPIC, {"topic": too_long}).code == \
            codes.TOPIC_NOT_EXIST
    created = ask(front, codes.UPDATE_AND_CREATE_TOPIC, {
        "topic": longest, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"})
    assert created.code == codes.SUCCESS, created.remark
    assert ask(front, codes.GET_ROUTEINFO_BY_TOPIC, {"topic": longest}).code == codes.SUCCESS
