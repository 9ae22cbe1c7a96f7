"""Issue 22, items 8 and 9: consumer groups are their users' own on the remoting front.

8. A heartbeat (34) needs SUB on each consumer group it names and on each topic it
   subscribes (a `%RETRY%g` topic: SUB on group g), as RocketMQ's `PlainAccessValidator`
   asks; an unregister (35) needs SUB on its `consumerGroup`.  The client table is keyed by
   client id, so naming another client's id also needs SUB on every group that id is in:
   otherwise a heartbeat or an unregister under the victim's id drops it from its group.
   Before, both needed only a valid signature: a user with no right on group `billing`
   joined it, replaced its subscription and evicted its member.
9. GET_CONSUME_STATS (208) with `topic` needs SUB on that topic too, not only on the group.

A refused request changes nothing: the members, their subscriptions and the
notifications sent are checked after every refusal.  Requests are signed by hand as in
test_acl_remoting.py.
"""

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
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from tests.remoting.fronts import front_over

USERS_FILE = """\
accounts:
  - accessKey: billing-app
    secretKey: billing-secret
    topicPerms: [Orders=SUB]
    groupPerms: [billing=SUB]
  - accessKey: reports-app
    secretKey: reports-secret
    topicPerms: [Audit=SUB]
    groupPerms: [reports=SUB]
"""
SECRETS = {"billing-app": "billing-secret", "reports-app": "reports-secret"}
VICTIM = Peer("10.0.0.5:40001", 1)
ATTACKER = Peer("10.0.0.6:40002", 2)
VICTIM_ID = "10.0.0.5@1234#1"


@pytest.fixture
def front(tmp_path: Path) -> Iterator[Front]:
    (tmp_path / "plain_acl.yml").write_text(USERS_FILE)
    with front_over(tmp_path / "store", users_file=tmp_path / "plain_acl.yml") as served:
        yield served


def signed(user: str, ext: dict[str, str], body: bytes) -> dict[str, str]:
    fields = dict(ext, AccessKey=user)
    content = "".join(fields[key] for key in sorted(fields)).encode() + body
    digest = hmac.new(SECRETS[user].encode(), content, hashlib.sha1).digest()
    return dict(fields, Signature=base64.b64encode(digest).decode())


def ask(front: Front, user: str, code: int, ext: dict[str, str], body: bytes = b"", *,
        peer: Peer) -> Command:
    request = Command(code, 7, 0, signed(user, ext, body), body)
    answer = asyncio.run(answer_to(front, request, peer))
    assert answer is not None
    return answer


def heartbeat(client_id: str, consumers: dict[str, list[str]]) -> bytes:
    """A Java push consumer's heartbeat: group → subscribed topics (newer subVersion)."""
    return json.dumps({"clientID": client_id, "producerDataSet": [{"groupName": "p"}],
                       "consumerDataSet": [
                           {"groupName": name, "consumeType": "CONSUME_PASSIVELY",
                            "messageModel": "CLUSTERING",
                            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                            "subscriptionDataSet": [
                                {"topic": topic, "subString": "hijacked",
                                 "expressionType": "TAG", "subVersion": 2**40}
                                for topic in topics]}
                           for name, topics in consumers.items()]}).encode()


def refused(answer: Command, why: str) -> None:
    assert answer.code == codes.NO_PERMISSION, (answer.code, answer.remark)
    assert why in (answer.remark or ""), answer.remark


def state(front: Front) -> dict[str, object]:
    """What the group looks like to its consumers: members and the subscription they pull."""
    subscription = front.clients.subscription("billing", "Orders")
    return {"members": [(entry.client_id, entry.connection_id)
                        for entry in front.clients.consumers("billing")],
            "expression": subscription.expression if subscription else None,
            "groups": front.clients.groups()}


@pytest.fixture
def joined(front: Front) -> list[int]:
    """The victim consumes Orders as billing; returns the connections told of changes."""
    body = json.dumps({"clientID": VICTIM_ID, "producerDataSet": [], "consumerDataSet": [
        {"groupName": "billing", "consumeType": "CONSUME_PASSIVELY",
         "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
         "subscriptionDataSet": [
             {"topic": "Orders", "subString": "TagA", "expressionType": "TAG",
              "subVersion": 1},
             {"topic": "%RETRY%billing", "subString": "*", "expressionType": "TAG",
              "subVersion": 1}]}]}).encode()
    assert ask(front, "billing-app", codes.HEART_BEAT, {}, body, peer=VICTIM).code == \
        codes.SUCCESS
    told: list[int] = []
    front.push = lambda connection_id, command: told.append(connection_id) is None
    return told


BEFORE = {"members": [(VICTIM_ID, 1)], "expression": "TagA", "groups": ["billing"]}


@pytest.mark.parametrize(("client_id", "consumers", "why"), [
    ("attacker@1#1", {"billing": ["Orders"]}, "lacks SUB on group billing"),
    ("attacker@1#1", {"billing": ["Audit"]}, "lacks SUB on group billing"),
    ("attacker@1#1", {"reports": ["Orders"]}, "lacks SUB on topic Orders"),
    ("attacker@1#1", {"reports": ["%RETRY%billing"]}, "lacks SUB on topic %RETRY%billing"),
    (VICTIM_ID, {"reports": ["Audit"]}, "lacks SUB on group billing"),
    (VICTIM_ID, {}, "lacks SUB on group billing"),
], ids=["join-the-group", "join-with-own-topic", "subscribe-a-topic", "subscribe-its-retry",
        "take-over-the-client-id", "take-over-with-no-consumer"])
def test_a_heartbeat_without_rights_on_the_group_changes_nothing(
        front: Front, joined: list[int], client_id: str, consumers: dict[str, list[str]],
        why: str) -> None:
    body = heartbeat(client_id, consumers)
    refused(ask(front, "reports-app", codes.HEART_BEAT, {}, body, peer=ATTACKER), why)
    assert state(front) == BEFORE
    assert joined == []  # the victim was told of no change, so it does not rebalance


@pytest.mark.parametrize("ext", [
    {"clientID": VICTIM_ID, "consumerGroup": "billing"},
    {"clientID": VICTIM_ID, "consumerGroup": "reports"},
    {"clientID": VICTIM_ID, "producerGroup": "p"},
    {"clientID": "attacker@1#1", "consumerGroup": "billing"},
], ids=["naming-the-group", "naming-its-own-group", "naming-no-group", "its-own-id"])
def test_an_unregister_without_rights_on_the_group_changes_nothing(
        front: Front, joined: list[int], ext: dict[str, str]) -> None:
    refused(ask(front, "reports-app", codes.UNREGISTER_CLIENT, ext, peer=ATTACKER),
            "lacks SUB on group billing")
    assert state(front) == BEFORE
    assert joined == []


@pytest.mark.parametrize("body", [b"[" * 100_000, b"{", b'"text"', b"\xff"],
                         ids=["nested-deep", "cut", "not-an-object", "not-utf8"])
def test_a_body_the_handler_refuses_is_left_to_it(front: Front, joined: list[int],
                                                  body: bytes) -> None:
    """The check reads the body as the handler does and never fails on it itself."""
    access = front.access
    assert access is not None
    access.check(Command(codes.HEART_BEAT, 7, 0, signed("reports-app", {}, body), body),
                 ATTACKER.address)
    answer = ask(front, "reports-app", codes.HEART_BEAT, {}, body, peer=ATTACKER)
    assert answer.code != codes.SUCCESS
    assert state(front) == BEFORE


def test_the_groups_own_users_are_served(front: Front, joined: list[int]) -> None:
    # Another group and its own topics, with its own client id: served.
    own = heartbeat("reports@1#1", {"reports": ["Audit", "%RETRY%reports"]})
    assert ask(front, "reports-app", codes.HEART_BEAT, {}, own, peer=ATTACKER).code == \
        codes.SUCCESS
    assert front.clients.groups() == ["billing", "reports"]
    # The victim's account reconnecting with its client id (a new connection): served.
    again = heartbeat(VICTIM_ID, {"billing": ["Orders"]})
    assert ask(front, "billing-app", codes.HEART_BEAT, {}, again,
               peer=Peer("10.0.0.5:40009", 9)).code == codes.SUCCESS
    assert state(front)["members"] == [(VICTIM_ID, 9)]
    leave = {"clientID": VICTIM_ID, "consumerGroup": "billing"}
    assert ask(front, "billing-app", codes.UNREGISTER_CLIENT, leave,
               peer=Peer("10.0.0.5:40009", 9)).code == codes.SUCCESS
    assert front.clients.groups() == ["reports"]


def test_consume_stats_of_a_topic_need_sub_on_it(front: Front, joined: list[int]) -> None:
    asked = {"consumerGroup": "reports", "topic": "Orders"}
    refused(ask(front, "reports-app", codes.GET_CONSUME_STATS, asked, peer=ATTACKER),
            "lacks SUB on topic Orders")
    refused(ask(front, "reports-app", codes.GET_CONSUME_STATS,
                dict(asked, consumerGroup="billing"), peer=ATTACKER),
            "lacks SUB on group billing")
    for ext in (dict(asked, topic="Audit"), {"consumerGroup": "reports"}):
        answer = ask(front, "reports-app", codes.GET_CONSUME_STATS, ext, peer=ATTACKER)
        assert answer.code == codes.SUCCESS, answer.remark
    answer = ask(front, "billing-app", codes.GET_CONSUME_STATS,
                 {"consumerGroup": "billing", "topic": "Orders"}, peer=VICTIM)
    assert answer.code == codes.SUCCESS, answer.remark
