"""Found item 2 on the remoting front: without AclClientRPCHook credentials, with a bad
signature, or without the permission, nothing is sent, pulled, committed, rewound or
administered; each refusal is NO_PERMISSION (16) with a remark saying why.

Requests are signed here the way the hook does it, computed by hand (values of the ext
fields in key order, then the body; Base64 HMAC-SHA1).  On the code before users existed
every request here reached its handler."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.access import NEEDS
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.routing import HANDLERS
from mqstore.services.notifier.remoting.server import answer_to
from tests.remoting.fronts import front_over

USERS_FILE = """\
globalWhiteRemoteAddresses: [10.99.0.*]
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    topicPerms: [Orders=PUB]
  - accessKey: consumer1
    secretKey: consumer-secret
    whiteRemoteAddress: 10.1.1.1
    topicPerms: [Orders=SUB]
    groupPerms: [billing=SUB]
  - accessKey: admin-01
    secretKey: admin-secret
    admin: true
"""
SECRETS = {"producer1": "producer-secret", "consumer1": "consumer-secret",
           "admin-01": "admin-secret"}
PEER = Peer("10.0.0.9:50000", 1)


@pytest.fixture
def front(tmp_path: Path) -> Iterator[Front]:
    (tmp_path / "plain_acl.yml").write_text(USERS_FILE)
    with front_over(tmp_path / "store", users_file=tmp_path / "plain_acl.yml") as served:
        yield served


def signed(user: str, ext: dict[str, str], body: bytes = b"", *,
           secret: str | None = None) -> dict[str, str]:
    fields = dict(ext, AccessKey=user)
    content = "".join(fields[key] for key in sorted(fields)).encode() + body
    digest = hmac.new((secret or SECRETS[user]).encode(), content, hashlib.sha1).digest()
    return dict(fields, Signature=base64.b64encode(digest).decode())


def ask(front: Front, code: int, ext: dict[str, str], body: bytes = b"",
        peer: Peer = PEER) -> Command:
    answer = asyncio.run(answer_to(front, Command(code, 7, 0, ext, body), peer))
    assert answer is not None
    return answer


def refused(answer: Command, why: str) -> None:
    assert answer.code == codes.NO_PERMISSION, (answer.code, answer.remark)
    assert why in (answer.remark or ""), answer.remark


SEND = {"a": "producers", "b": "Orders", "c": "TBW102", "d": "4", "e": "0", "f": "0",
        "g": "1700000000000", "h": "0", "i": "", "j": "0", "m": "false"}
PULL = {"consumerGroup": "billing", "topic": "Orders", "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0",
        "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"}


def test_without_credentials_or_with_a_bad_signature_nothing_is_served(front: Front) -> None:
    refused(ask(front, codes.SEND_MESSAGE_V2, SEND, b"body"), "no AccessKey")
    refused(ask(front, codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"}), "no AccessKey")
    refused(ask(front, codes.HEART_BEAT, {}, b"{}"), "no AccessKey")
    refused(ask(front, codes.SEND_MESSAGE_V2, signed("nobody-at-all", SEND, b"body",
                                                      secret="whatever")),
            "no account for AccessKey nobody-at-all")
    forged = signed("producer1", SEND, b"body", secret="guessed-secret")
    refused(ask(front, codes.SEND_MESSAGE_V2, forged, b"body"), "check signature failed")
    changed = signed("producer1", SEND, b"body")
    refused(ask(front, codes.SEND_MESSAGE_V2, changed, b"another body"),
            "check signature failed")


@pytest.mark.parametrize("topic", ["TBW102", "SCHEDULE_TOPIC_XXXX", "%RETRY%billing",
                                   "%DLQ%billing", "Audit"])
def test_sends_need_pub_on_the_topic_system_topics_included(front: Front, topic: str) -> None:
    ext = dict(SEND, b=topic)
    refused(ask(front, codes.SEND_MESSAGE_V2, signed("producer1", ext, b"x"), b"x"),
            f"AccessKey producer1 lacks PUB on topic {topic}"
            if not topic.startswith("%RETRY%") else "lacks PUB on topic %RETRY%billing")
    batch = {"producerGroup": "p", "topic": topic, "defaultTopic": "TBW102",
             "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
             "bornTimestamp": "1", "flag": "0", "batch": "true"}
    refused(ask(front, codes.SEND_BATCH_MESSAGE, signed("producer1", batch, b"x"), b"x"),
            "lacks PUB")


def test_pulls_offsets_and_rewinds_need_sub_on_topic_and_group(front: Front) -> None:
    refused(ask(front, codes.PULL_MESSAGE, signed("producer1", PULL)),
            "lacks SUB on group billing")
    other_group = dict(PULL, consumerGroup="other")
    refused(ask(front, codes.PULL_MESSAGE, signed("consumer1", other_group)),
            "lacks SUB on group other")
    query = {"consumerGroup": "other", "topic": "Orders", "queueId": "0"}
    refused(ask(front, codes.QUERY_CONSUMER_OFFSET, signed("consumer1", query)),
            "SUB on group other")
    commit = dict(query, commitOffset="0")
    refused(ask(front, codes.UPDATE_CONSUMER_OFFSET, signed("consumer1", commit)),
            "SUB on group other")
    reset = {"topic": "Orders", "group": "billing", "timestamp": "0", "isForce": "true"}
    refused(ask(front, codes.INVOKE_BROKER_TO_RESET_OFFSET, signed("consumer1", reset)),
            "lacks an admin account")
    refused(ask(front, codes.VIEW_MESSAGE_BY_ID, signed("consumer1", {"offset": "0"})),
            "an admin account")
    key_query = {"topic": "Audit", "key": "k", "maxNum": "1", "beginTimestamp": "0",
                 "endTimestamp": "1"}
    refused(ask(front, codes.QUERY_MESSAGE, signed("consumer1", key_query)),
            "SUB on topic Audit")
    lock = json.dumps({"consumerGroup": "other", "clientId": "c", "mqSet": []}).encode()
    refused(ask(front, codes.LOCK_BATCH_MQ, signed("consumer1", {}, lock), lock),
            "SUB on group other")


def test_administration_needs_an_admin(front: Front) -> None:
    create = {"topic": "Pay", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
              "defaultTopic": "TBW102", "topicFilterType": "SINGLE_TAG"}
    for code, ext in ((codes.UPDATE_AND_CREATE_TOPIC, create),
                      (codes.DELETE_TOPIC_IN_BROKER, {"topic": "Orders"}),
                      (codes.DELETE_TOPIC_IN_NAMESRV, {"topic": "Orders"}),
                      (codes.GET_ALL_TOPIC_CONFIG, {}),
                      (codes.GET_BROKER_RUNTIME_INFO, {})):
        refused(ask(front, code, signed("producer1", ext)), "an admin account")
    assert ask(front, codes.UPDATE_AND_CREATE_TOPIC, signed("admin-01", create)).code == \
        codes.SUCCESS


def test_granted_requests_reach_their_handlers(front: Front) -> None:
    max_offset = {"topic": "Orders", "queueId": "0"}
    assert ask(front, codes.GET_MAX_OFFSET, signed("consumer1", max_offset)).code == \
        codes.SUCCESS
    route = ask(front, codes.GET_ROUTEINFO_BY_TOPIC, signed("producer1", {"topic": "TBW102"}))
    assert route.code == codes.SUCCESS  # a route is names, not data: any user
    heartbeat = json.dumps({"clientID": "c", "producerDataSet": [],
                            "consumerDataSet": []}).encode()
    assert ask(front, codes.HEART_BEAT, signed("producer1", {}, heartbeat),
               heartbeat).code == codes.SUCCESS
    unknown = ask(front, 4242, signed("producer1", {}))
    assert unknown.code == codes.REQUEST_CODE_NOT_SUPPORTED


def test_white_listed_addresses(front: Front) -> None:
    # The account's own address: no signature needed, permissions still apply.
    white = Peer("10.1.1.1:40000", 2)
    query = {"consumerGroup": "billing", "topic": "Orders", "queueId": "0"}
    unsigned = dict(query, AccessKey="consumer1")
    assert ask(front, codes.GET_MAX_OFFSET, unsigned, peer=white).code == codes.SUCCESS
    refused(ask(front, codes.GET_MAX_OFFSET, dict(unsigned, topic="Audit"), peer=white),
            "SUB on topic Audit")
    refused(ask(front, codes.GET_MAX_OFFSET, unsigned), "check signature failed")
    # A global white address: no credentials at all.
    assert ask(front, codes.GET_MAX_OFFSET, {"topic": "Audit", "queueId": "0"},
               peer=Peer("10.99.0.4:1", 3)).code == codes.SUCCESS


def test_every_served_code_has_its_row() -> None:
    assert set(HANDLERS) <= set(NEEDS), sorted(set(HANDLERS) - set(NEEDS))
