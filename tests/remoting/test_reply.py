"""Request-reply and the broker's stamps, handler by handler: SEND_REPLY_MESSAGE_V2 (325)
pushes the reply to its requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT, 326) and waits
for its answer, then stores it; sends are stamped with MSG_REGION, TRACE_ON and CLUSTER
(services/notifier/remoting/reply.py, services/notifier/remoting/server_calls.py,
services/notifier/remoting/stamps.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.services.common.links.forward_wire import ForwardAnswer, ForwardRequest
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.client_table import ClientEntry
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import FLAG_RESPONSE, Command
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.services.notifier.remoting.server_calls import CallRefused, ServerCalls
from mqstore.services.notifier.remoting.stamps import PropertyStamps
from mqstore.storage.format.properties import decode_properties, encode_properties
from tests.remoting.fronts import front_over

RESPONDER = Peer("10.0.0.9:50000", 1)
REQUESTER_CONNECTION = 7
REQUESTER = "10.0.0.8@4242#1"


class Link:
    """The writer link: records what is forwarded, stores it at offset 5."""

    def __init__(self) -> None:
        self.sent: list[ForwardRequest] = []

    async def send(self, request: ForwardRequest) -> ForwardAnswer:
        self.sent.append(request)
        return ForwardAnswer(request.request_id, "PUT_OK", [(5, 4096, 1)], "")


@pytest.fixture
def front(tmp_path: Path) -> Iterator[Front]:
    with front_over(tmp_path / "store") as served:
        served.link = Link()  # type: ignore[assignment]
        served.settings = dataclasses.replace(served.settings, reply_push_timeout_ms=200)
        served.clients.heartbeat(ClientEntry(REQUESTER, REQUESTER_CONNECTION, "10.0.0.8:1",
                                             "JAVA", 453, 0, producer_groups={"p"}),
                                 per_connection_max=16)
        yield served


def _reply(properties: dict[str, str]) -> Command:
    return Command(codes.SEND_REPLY_MESSAGE_V2, 11, 0, {
        "a": "responders", "b": "DefaultCluster_REPLY_TOPIC", "c": "TBW102", "d": "4",
        "e": "0", "f": "0", "g": "1700000000000", "h": "0",
        "i": encode_properties(properties).decode()}, b"the answer")


def _answered_by_requester(front: Front, code: int) -> list[Command]:
    pushed: list[Command] = []

    def push(connection_id: int, command: Command) -> bool:
        assert connection_id == REQUESTER_CONNECTION
        pushed.append(command)
        asyncio.get_running_loop().call_soon(front.calls.answered, Command(
            code, command.opaque, FLAG_RESPONSE), connection_id)
        return True

    front.push = push
    return pushed


def test_a_reply_is_pushed_to_its_requester_then_stored(front: Front) -> None:
    pushed = _answered_by_requester(front, codes.SUCCESS)
    answer = asyncio.run(answer_to(front, _reply({
        "CORRELATION_ID": "c-1", "REPLY_TO_CLIENT": REQUESTER, "MSG_TYPE": "reply"}),
        RESPONDER))
    assert answer is not None and answer.code == codes.SUCCESS, answer
    (push,) = pushed
    assert push.code == codes.PUSH_REPLY_MESSAGE_TO_CLIENT and push.body == b"the answer"
    fields = push.ext_fields
    assert (fields["producerGroup"], fields["topic"], fields["bornHost"], fields["storeHost"]) \
        == ("responders", "DefaultCluster_REPLY_TOPIC", RESPONDER.address, "127.0.0.1:9876")
    properties = decode_properties(fields["properties"].encode())
    assert properties["CORRELATION_ID"] == "c-1" and "PUSH_REPLY_TIME" in properties
    assert properties["MSG_REGION"] == "DefaultRegion" and "CLUSTER" not in properties
    (stored,) = front.link.sent  # type: ignore[attr-defined]
    assert stored.topic == "DefaultCluster_REPLY_TOPIC" and stored.body == b"the answer"
    assert answer.ext_fields["queueOffset"] == "5"


@pytest.mark.parametrize(("properties", "answered", "remark"), [
    ({"CORRELATION_ID": "c"}, codes.SUCCESS, "properties[REPLY_TO_CLIENT] is null"),
    ({"REPLY_TO_CLIENT": "1.2.3.4@1#1"}, codes.SUCCESS, "channel of 1.2.3.4@1#1 not found"),
    ({"REPLY_TO_CLIENT": REQUESTER}, codes.SYSTEM_ERROR, f"push reply message to {REQUESTER}"
                                                         f"fail"),
])
def test_a_reply_that_reaches_no_requester_answers_1_and_stores_nothing(
        front: Front, properties: dict[str, str], answered: int, remark: str) -> None:
    _answered_by_requester(front, answered)
    answer = asyncio.run(answer_to(front, _reply(properties), RESPONDER))
    assert answer is not None and answer.code == codes.SYSTEM_ERROR
    assert remark in (answer.remark or "")
    assert front.link.sent == []  # type: ignore[attr-defined]


def test_a_requester_that_never_answers_costs_one_call_for_the_timeout(front: Front) -> None:
    front.push = lambda connection_id, command: True
    answer = asyncio.run(answer_to(front, _reply({"REPLY_TO_CLIENT": REQUESTER}), RESPONDER))
    assert answer is not None and answer.code == codes.SYSTEM_ERROR
    assert "no answer in 200 ms" in (answer.remark or "")
    assert front.calls.waiting == 0


def test_calls_are_bounded_and_answered_only_from_the_connection_called() -> None:
    async def scenario() -> None:
        calls = ServerCalls(calls_max=1)
        waiting = asyncio.create_task(calls.call(lambda c, r: True, 3, Command(326, 99),
                                                 timeout_ms=5000))
        await asyncio.sleep(0)
        with pytest.raises(CallRefused, match="server_calls_max"):
            await calls.call(lambda c, r: True, 3, Command(326, 100), timeout_ms=5000)
        assert not calls.answered(Command(0, 99, FLAG_RESPONSE), 4)  # another connection
        assert calls.answered(Command(0, 99, FLAG_RESPONSE), 3)
        assert (await waiting).opaque == 99
        with pytest.raises(CallRefused, match="gone"):
            await calls.call(lambda c, r: False, 3, Command(326, 101), timeout_ms=5000)

    asyncio.run(scenario())


@pytest.mark.parametrize(("sent", "reply", "stored"), [
    (b"", False, "MSG_REGION\x01eu\x02TRACE_ON\x01false\x02CLUSTER\x01C\x02"),
    (b"TAGS\x01a", False, "TAGS\x01a\x02MSG_REGION\x01eu\x02TRACE_ON\x01false\x02CLUSTER\x01C\x02"),
    (b"TAGS\x01a\x02", True, "TAGS\x01a\x02MSG_REGION\x01eu\x02TRACE_ON\x01false\x02"),
    (b"CLUSTER\x01old\x02k\x01v\x02", False,
     "CLUSTER\x01C\x02k\x01v\x02MSG_REGION\x01eu\x02TRACE_ON\x01false\x02"),
])
def test_sends_are_stamped_as_rocketmqs_broker_stamps_them(sent: bytes, reply: bool,
                                                          stored: str) -> None:
    stamps = PropertyStamps(RemotingSettings(region_id="eu", trace_on=False, cluster_name="C"))
    assert stamps.stamped(sent, reply=reply) == stored.encode()
