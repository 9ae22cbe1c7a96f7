"""A send that names no queue goes round robin per topic, as the writer's HTTP produce does
(issue 22, Found 3): the front used one counter for every topic, so interleaved sends to two
topics of four queues each took queues 0 and 2 of each, and queues 1 and 3 got nothing."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.services.common.links.forward_wire import ForwardAnswer, ForwardRequest
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from tests.remoting.client import send_header
from tests.remoting.fronts import front_over

PEER = Peer("10.0.0.9:50000", 1)


@pytest.fixture
def front(tmp_path: Path) -> Iterator[Front]:
    with front_over(tmp_path) as served:
        yield served


def test_sends_naming_no_queue_go_round_robin_per_topic(front: Front,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    chosen: dict[str, list[int]] = defaultdict(list)

    async def writer(request: ForwardRequest) -> ForwardAnswer:  # stands in for the writer
        chosen[request.topic].append(request.queue_id)
        return ForwardAnswer(request.request_id, "PUT_OK", [(0, 0, 0)], "")

    monkeypatch.setattr(front.link, "send", writer)
    for topic in ("Pay", "Ship"):
        created = asyncio.run(answer_to(front, Command(codes.UPDATE_AND_CREATE_TOPIC, 1, 0, {
            "topic": topic, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}), PEER))
        assert created is not None
        assert created.code == codes.SUCCESS
    for _ in range(4):
        for topic in ("Pay", "Ship"):
            answer = asyncio.run(answer_to(front, Command(
                codes.SEND_MESSAGE_V2, 2, 0, send_header(topic, -1), b"body"), PEER))
            assert answer is not None
            assert answer.code == codes.SUCCESS, answer.remark
    assert chosen == {"Pay": [0, 1, 2, 3], "Ship": [0, 1, 2, 3]}
