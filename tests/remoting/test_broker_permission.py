"""`brokerPermission` at run time (services/notifier/remoting/broker_config.py): what
`mqadmin updateBrokerConfig -k brokerPermission -v 4` does to a front.  Read only, every
topic is routed with permission 4 and a send is refused with RocketMQ's remark; the value is
in `config/broker.properties`, so another front of the volume (a restart, an extra
notifier) serves it too; 6 serves sends again.  Any other key is refused, nothing changed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.storage.files.broker_properties import BrokerPropertiesFile, parse
from tests.remoting.fronts import front_over

PEER = Peer("10.0.0.9:50000", 1)


def _ask(front: Front, code: int, body: bytes = b"", **ext: str) -> Command:
    answer = asyncio.run(answer_to(front, Command(code, 7, 0, dict(ext), body=body), PEER))
    assert answer is not None
    return answer


def _route_perms(front: Front, topic: str) -> list[int]:
    answer = _ask(front, codes.GET_ROUTEINFO_BY_TOPIC, topic=topic)
    assert answer.code == codes.SUCCESS, answer.remark
    return [data["perm"] for data in json.loads(bytes(answer.body))["queueDatas"]]


def _send(front: Front, topic: str) -> Command:
    return _ask(front, codes.SEND_MESSAGE_V2, b"body", a="p", b=topic, c="TBW102", d="4",
                e="0", f="0", g="0", h="0", i="", j="0", k="false")


def test_read_only_routes_with_perm_4_and_refuses_sends_until_writable_again(
        tmp_path: Path) -> None:
    with front_over(tmp_path) as front:
        created = _ask(front, codes.UPDATE_AND_CREATE_TOPIC, topic="Orders",
                       readQueueNums="2", writeQueueNums="2", perm="6")
        assert created.code == codes.SUCCESS
        assert _route_perms(front, "Orders") == [6]
        assert _ask(front, codes.UPDATE_BROKER_CONFIG, b"brokerPermission=4\n").code == \
            codes.SUCCESS
        assert _route_perms(front, "Orders") == [4]
        refused = _send(front, "Orders")
        assert (refused.code, refused.remark) == (
            codes.NO_PERMISSION, "the broker[mqstore, 127.0.0.1:9876] sending message is "
                                 "forbidden")
        config = _ask(front, codes.GET_BROKER_CONFIG)
        assert parse(bytes(config.body).decode())["brokerPermission"] == "4"
        assert "timestamp" in json.loads(config.ext_fields["version"])
    with front_over(tmp_path) as again:  # a restart, or another notifier of the volume
        assert _route_perms(again, "Orders") == [4]
        assert _ask(again, codes.UPDATE_BROKER_CONFIG, b"brokerPermission=6").code == \
            codes.SUCCESS
        assert _route_perms(again, "Orders") == [6]
    assert BrokerPropertiesFile(tmp_path).read() == {"brokerPermission": "6"}


def test_a_topic_without_write_permission_refuses_sends(tmp_path: Path) -> None:
    with front_over(tmp_path) as front:
        _ask(front, codes.UPDATE_AND_CREATE_TOPIC, topic="Frozen", readQueueNums="1",
             writeQueueNums="1", perm="4")
        refused = _send(front, "Frozen")
        assert (refused.code, refused.remark) == (
            codes.NO_PERMISSION, "the topic[Frozen] sending message is forbidden")


@pytest.mark.parametrize(("body", "remark"), [
    (b"flushDiskType=SYNC_FLUSH", "not flushDiskType"),
    (b"brokerPermission=9", "must be a permission"),
    (b"brokerPermission=rw", "must be a permission"),
    (b"", "not nothing"),
    (b"\xff", "not UTF-8"),
])
def test_anything_but_a_permission_is_refused_and_changes_nothing(
        tmp_path: Path, body: bytes, remark: str) -> None:
    with front_over(tmp_path) as front:
        answer = _ask(front, codes.UPDATE_BROKER_CONFIG, body)
        assert answer.code == codes.SYSTEM_ERROR and remark in (answer.remark or ""), answer
    assert BrokerPropertiesFile(tmp_path).read() == {}


def test_the_properties_file_reads_as_java_writes_it(tmp_path: Path) -> None:
    assert parse("# c\n! c\n\n a = 1 \nb:2\nc=x=y\n") == {"a": "1", "b": "2", "c": "x=y"}
    file = BrokerPropertiesFile(tmp_path)
    file.update({"brokerPermission": "4"})
    file.update({"other": "1"})
    assert file.read() == {"brokerPermission": "4", "other": "1"}
    with pytest.raises(ValueError, match="no line break"):
        file.update({"a": "b\nc=d"})
