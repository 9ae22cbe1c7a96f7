"""Malformed remoting input is one quiet line and an error code (issue 22, Found 14).

Before: a JSON header nested deep raised RecursionError out of the connection's reader
("Unhandled exception in client_connected_cb" with a traceback at ERROR), a body nested deep
did the same inside a handler ("request code 34 failed"), and a lone surrogate (`\\ud800`)
in a header reached the handlers, which echoed it or looked it up; and a full topic table
answered SYSTEM_ERROR (1) where docs/remoting.md and services/notifier/remoting/send.py say
TOPIC_NOT_EXIST (17); every writer timeout logged "Future exception was never retrieved";
and a stop logged each open connection's CancelledError with a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
from pathlib import Path

import pytest

from mqstore.services.common.links.forward_secret import SECRET_SIZE_BYTES
from mqstore.services.common.links.forward_wire import KIND_SINGLE, ForwardRequest
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.codes import RemotingError
from mqstore.services.notifier.remoting.context import Peer
from mqstore.services.notifier.remoting.frame import SERIALIZE_JSON, Command, decode, encode
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.services.notifier.remoting.service import RemotingFront
from mqstore.services.notifier.remoting.topics import TopicConfig
from mqstore.services.notifier.remoting.writer_link import WriterLink
from tests.abuse.remoting_live import read_frame, serving, tracebacks_and_errors

PEER = Peer("127.0.0.1:5000", 1)
SETTINGS = RemotingSettings(port=0)


def _json_frame(header: str) -> bytes:
    encoded = header.encode()
    return ((4 + len(encoded)).to_bytes(4, "big")
            + (SERIALIZE_JSON << 24 | len(encoded)).to_bytes(4, "big") + encoded)


async def _sent_then_good(front: RemotingFront, frame: bytes) -> bytes:
    """Send `frame`, read to the close; then a good request on a new connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", front.server.port)
    writer.write(frame)
    left = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", front.server.port)
    writer.writelines(encode(Command(codes.GET_BROKER_CLUSTER_INFO, opaque=3)))
    assert decode(await read_frame(reader)).code == codes.SUCCESS
    writer.close()
    return left


@pytest.mark.parametrize("depth", [990, 100_000])
def test_a_header_nested_deep_closes_its_connection_quietly(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, depth: int) -> None:
    caplog.set_level("DEBUG")
    nested = "[" * depth + "]" * depth
    header = f'{{"code":105,"opaque":1,"extFields":{{"topic":{nested}}}}}'

    async def run() -> bytes:
        async with serving(tmp_path, SETTINGS) as front:
            return await _sent_then_good(front, _json_frame(header))

    left = asyncio.run(run())
    if left:  # shallow enough to decode: answered as a topic name, refused
        assert decode(left[4:]).code != codes.SUCCESS
    assert tracebacks_and_errors(caplog) == []


@pytest.mark.parametrize("code, field, ext", [
    (codes.QUERY_MESSAGE, "key", {"topic": "t", "key": "\ud800", "maxNum": "1",
                                  "beginTimestamp": "0", "endTimestamp": "1"}),
    (codes.UPDATE_CONSUMER_OFFSET, "consumerGroup", {
        "consumerGroup": "cg\udfff", "topic": "t", "queueId": "0", "commitOffset": "1"}),
    (codes.GET_ROUTEINFO_BY_TOPIC, "topic", {"topic": "\ud800"}),
    (codes.GET_CONSUMER_LIST_BY_GROUP, "consumerGroup", {"consumerGroup": "\ud800"}),
])
def test_a_lone_surrogate_in_a_header_is_refused_naming_the_field(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, code: int, field: str,
        ext: dict[str, str]) -> None:
    caplog.set_level("DEBUG")

    async def run() -> Command | None:
        async with serving(tmp_path, SETTINGS) as front:
            return await answer_to(front.front, Command(code, 9, 0, ext), PEER)

    answer = asyncio.run(run())
    assert answer is not None
    assert answer.code == codes.SYSTEM_ERROR
    assert answer.remark == f"the custom field <{field}> is not UTF-8 text (a lone surrogate)"
    assert tracebacks_and_errors(caplog) == []


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"clientID":"\\ud800"}'])
def test_a_heartbeat_body_nested_deep_or_not_utf8_is_refused(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, body: bytes) -> None:
    caplog.set_level("DEBUG")

    async def run() -> Command | None:
        async with serving(tmp_path, SETTINGS) as front:
            return await answer_to(front.front, Command(codes.HEART_BEAT, 9, 0, {}, body),
                                   PEER)

    answer = asyncio.run(run())
    assert answer is not None
    assert answer.code != codes.SUCCESS
    assert answer.remark
    assert tracebacks_and_errors(caplog) == []


def test_a_full_topic_table_answers_topic_not_exist(tmp_path: Path) -> None:
    settings = RemotingSettings(port=0, topics_max=1)

    async def run() -> Command | None:
        async with serving(tmp_path, settings) as front:
            front.front.topics.create(TopicConfig("first", 1, 1, 6))
            return await answer_to(front.front, Command(
                codes.UPDATE_AND_CREATE_TOPIC, 9, 0,
                {"topic": "second", "readQueueNums": "1", "writeQueueNums": "1",
                 "perm": "6"}), PEER)

    answer = asyncio.run(run())
    assert answer is not None
    assert answer.code == codes.TOPIC_NOT_EXIST
    assert "topics_max" in (answer.remark or "")
    written = json.loads((tmp_path / "config" / "topics.json").read_text())
    assert written["topicConfigTable"].keys() == {"first"}


def test_a_writer_timeout_logs_one_warning_and_no_unretrieved_future(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Before: the timed-out send's own future got the link's exception after its waiter
    left, and "Future exception was never retrieved" was logged at ERROR when collected."""
    caplog.set_level("DEBUG")

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # (3.11 logs a cancelled one)
            await reader.read()  # reads everything, answers nothing (not even the handshake)
        writer.close()

    async def run() -> int:
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        secret = tmp_path / "forward-secret"
        secret.write_text("ab" * SECRET_SIZE_BYTES)
        link = WriterLink(RemotingSettings(port=0, writer_address=address,
                                           writer_timeout_ms=50), secret_path=secret)
        try:
            with pytest.raises(RemotingError) as refused:
                await link.send(ForwardRequest(0, KIND_SINGLE, 0, 0, 0, 0, 0,
                                               "127.0.0.1:1", "t", b"", b"x"))
            return refused.value.code
        finally:
            await link.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(run()) == codes.SYSTEM_ERROR
    gc.collect()
    assert tracebacks_and_errors(caplog) == []
    assert [record.levelname for record in caplog.records
            if record.name == "mqstore.remoting"] == ["WARNING"]
