"""A send the writer link cannot take inline (not connected, or its buffer full) is forwarded
later as it was checked: one check, one queue choice, one answer."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from mqstore.services.common.links.forward_wire import ForwardAnswer, ForwardRequest
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.server import RemotingServer
from mqstore.storage import PutStatus
from tests.remoting.client import RemotingClient, send_header
from tests.remoting.fronts import front_over


class LaterLink:
    """A writer link that never takes a send inline, and stores what `send` is given."""

    def __init__(self) -> None:
        self.sent: list[ForwardRequest] = []

    def send_nowait(self, request: ForwardRequest) -> None:
        return None

    async def send(self, request: ForwardRequest) -> ForwardAnswer:
        self.sent.append(request)
        offset = len(self.sent) - 1
        return ForwardAnswer(request.request_id, PutStatus.PUT_OK.value,
                             [(offset, 1000 + offset, 0)], "")


def test_a_send_left_to_the_broker_gets_one_queue_choice(tmp_path: Path) -> None:
    async def scenario(link: LaterLink) -> list[str]:
        with front_over(tmp_path / "store") as front:
            server = RemotingServer(dataclasses.replace(front, link=link))  # type: ignore[arg-type]
            port = await server.start()
            client = await RemotingClient.connect(f"127.0.0.1:{port}")
            try:
                answers = [await client.request(codes.SEND_MESSAGE_V2,
                                                send_header("Later", -1), b"body")
                           for _ in range(3)]
            finally:
                await client.close()
                await server.close()
        assert [answer.code for answer in answers] == [codes.SUCCESS] * 3
        return [answer.ext_fields["queueId"] for answer in answers]

    link = LaterLink()
    queue_ids = asyncio.run(scenario(link))
    assert queue_ids == ["0", "1", "2"]  # round robin, one step per send
    assert [request.queue_id for request in link.sent] == [0, 1, 2]
