"""RocketMQ applications on a broker with users (`auth.users_file`): the Java client (4.9.8
and 5.5.0) with `AclClientRPCHook` produces and consumes; without it, with a wrong secret, or
as a user without PUB on the topic, it is refused NO_PERMISSION (16).  The Go client too.

What the Java client sees without the hook: the name server (the same port here) refuses its
route lookup with 16 and the remark, so the client finds no route and its send fails with
"No route info of this topic" (client code 10005) before reaching the send handler.  A user
whose signature is good but who lacks PUB gets the route and is refused at the send: the
exception carries 16 and the broker's remark.

A user with good credentials but no right on a consumer group cannot take it over (issue 22,
finding 8): while a real Java push consumer consumes, another user keeps sending heartbeats
that join its group with another subscription (a newer subVersion) and unregisters from it;
each is refused NO_PERMISSION and the consumer receives every message once.  Before, a Java
push consumer under that attack received 2 of 20 messages.

These run against mqstore only: the RocketMQ peer runs without ACL.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.services.notifier.remoting import codes
from tests.remoting.client import RemotingClient, heartbeat
from tests.remoting.up_process import mqstore_up
from tests.remoting_clients.go_client import GoClient
from tests.remoting_clients.java_clients import JavaClients, ScenarioError
from tests.remoting_clients.test_java_clients import assert_all_received

pytestmark = pytest.mark.remoting_clients

COUNT = 60
NO_PERMISSION = 16
NOT_FOUND_TOPIC_EXCEPTION = 10005
"""The Java client's own code (ClientErrorCode) for a send that found no route."""
APP = {"access_key": "app-user", "secret_key": "app-secret-1234"}
READER = {"access_key": "reader-user", "secret_key": "reader-secret-1234"}
MALLORY = {"access_key": "mallory", "secret_key": "mallory-secret-1234"}
"""Signs well, and may use only a topic and a group of her own."""
USERS_FILE = f"""\
accounts:
  - accessKey: {APP["access_key"]}
    secretKey: {APP["secret_key"]}
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: {READER["access_key"]}
    secretKey: {READER["secret_key"]}
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
  - accessKey: {MALLORY["access_key"]}
    secretKey: {MALLORY["secret_key"]}
    topicPerms: [mallory-topic=PUB|SUB]
    groupPerms: [mallory-group=SUB]
  - accessKey: services-admin
    secretKey: services-admin-secret
    admin: true
"""
"""The app may send and read every (non-system) topic; the reader may only read.  The
admin is the account the notifier signs its notice-stream requests with."""


@pytest.fixture(scope="module")
def acl_namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mqstore up` with the users file above: its remoting port."""
    directory: Path = tmp_path_factory.mktemp("mqstore-up-acl")
    users_file = directory / "plain_acl.yml"
    users_file.write_text(USERS_FILE)
    with mqstore_up(directory, settings={"MQSTORE_AUTH__USERS_FILE": str(users_file)}) as ports:
        yield f"127.0.0.1:{ports['remoting']}"


def new_topic() -> str:
    return f"acl-{uuid.uuid4().hex[:12]}"


def refused_by(outcome: dict[str, Any]) -> dict[str, Any]:
    """The exception of the chain that carries the server's answer (response code 16)."""
    assert outcome["ok"] is False, outcome
    answers = [error for error in outcome["errors"] if error.get("responseCode") == NO_PERMISSION
               and error["message"].startswith("CODE: 16")]
    assert len(answers) == 1, outcome
    return answers[0]


@pytest.mark.parametrize(("scenario", "mode"), [("lite-subscribe", "batch"),
                                                ("push-concurrently", "sync")])
def test_with_the_hook_a_client_produces_and_consumes(java_clients: JavaClients,
                                                      acl_namesrv: str, scenario: str,
                                                      mode: str) -> None:
    result = java_clients.run(scenario, namesrv=acl_namesrv, topic=new_topic(), count=COUNT,
                              mode=mode, **APP)
    assert result["sent"] == COUNT, result
    assert_all_received(result, expected=COUNT)


def test_without_the_hook_the_name_server_refuses_and_nothing_is_sent(
        java_clients: JavaClients, acl_namesrv: str) -> None:
    topic = new_topic()
    result = java_clients.run("refused", namesrv=acl_namesrv, topic=topic)
    send = result["send"]
    assert send["ok"] is False, send
    assert send["errors"][0]["responseCode"] == NOT_FOUND_TOPIC_EXCEPTION, send
    assert send["errors"][0]["errorMessage"].startswith(f"No route info of this topic: {topic}")
    remark = ("request code 105 refused: no AccessKey: this broker needs credentials "
              "(AclClientRPCHook)")
    for lookup in ("producerRoute", "consumerRoute"):
        assert refused_by(result[lookup])["errorMessage"] == remark, result[lookup]


def test_with_a_wrong_secret_the_signature_is_refused(java_clients: JavaClients,
                                                      acl_namesrv: str) -> None:
    result = java_clients.run("refused", namesrv=acl_namesrv, topic=new_topic(),
                              access_key=APP["access_key"], secret_key="not-the-secret")
    assert result["send"]["errors"][0]["responseCode"] == NOT_FOUND_TOPIC_EXCEPTION, result
    for lookup in ("producerRoute", "consumerRoute"):
        assert refused_by(result[lookup])["errorMessage"] == (
            f"request code 105 refused: check signature failed for AccessKey "
            f"{APP['access_key']}"), result[lookup]


def test_a_user_without_pub_on_the_topic_is_refused_at_the_send(java_clients: JavaClients,
                                                                acl_namesrv: str) -> None:
    topic = new_topic()
    created = java_clients.run("refused", namesrv=acl_namesrv, topic=topic, **APP)
    assert created["send"] == {"ok": True, "result": "status SEND_OK"}, created
    result = java_clients.run("refused", namesrv=acl_namesrv, topic=topic, **READER)
    assert result["producerRoute"]["ok"] is True, result
    assert result["consumerRoute"]["ok"] is True, result
    send = result["send"]
    assert send["errors"][0]["class"].endswith("MQClientException"), send
    assert send["errors"][0]["responseCode"] == NO_PERMISSION, send
    answer = refused_by(send)
    assert answer["class"].endswith("MQBrokerException"), send
    assert answer["errorMessage"] == (f"request code 310 refused: AccessKey "
                                      f"{READER['access_key']} lacks PUB on topic {topic}")


@pytest.fixture(scope="module")
def go_client() -> GoClient:
    return GoClient.build()


def test_the_go_client_with_credentials_produces_and_consumes(go_client: GoClient,
                                                              acl_namesrv: str) -> None:
    result = go_client.run(namesrv=acl_namesrv, topic=new_topic(), count=COUNT, **APP)
    assert result["sent"] == COUNT, result
    assert_all_received(result, expected=COUNT)


def test_the_go_client_without_credentials_or_pub_is_refused(go_client: GoClient,
                                                             acl_namesrv: str) -> None:
    topic = new_topic()
    with pytest.raises(ScenarioError) as unsigned:
        go_client.run(namesrv=acl_namesrv, topic=topic, count=1)
    assert f"produce: send 0: the topic={topic} route info not found" in str(unsigned.value)
    assert go_client.run(namesrv=acl_namesrv, topic=topic, count=1, **APP)["ok"] is True
    with pytest.raises(ScenarioError) as refusal:
        go_client.run(namesrv=acl_namesrv, topic=topic, count=1, **READER)
    assert (f"produce: send 0: CODE: 16, DESC: request code 10 refused: AccessKey "
            f"{READER['access_key']} lacks PUB on topic {topic}") in str(refusal.value)


def _signed(ext: dict[str, str], body: bytes) -> dict[str, str]:
    """`ext` signed as AclClientRPCHook signs it, with Mallory's own credentials."""
    fields = dict(ext, AccessKey=MALLORY["access_key"])
    content = "".join(fields[key] for key in sorted(fields)).encode() + body
    digest = hmac.new(MALLORY["secret_key"].encode(), content, hashlib.sha1).digest()
    return dict(fields, Signature=base64.b64encode(digest).decode())


class Hijacker:
    """Joins `group` with another subscription of `topic` and leaves it, in a loop, until
    stopped; keeps every answer code."""

    def __init__(self, address: str, *, group: str, topic: str) -> None:
        self.answers: list[int] = []
        self._address, self._group, self._topic = address, group, topic
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def __enter__(self) -> Hijacker:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping.set()
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the hijacker did not stop"

    async def _run(self) -> None:
        client = await RemotingClient.connect(self._address)
        document = json.loads(heartbeat("mallory@1#1", self._group, self._topic, "hijacked"))
        for consumer in document["consumerDataSet"]:
            for subscription in consumer["subscriptionDataSet"]:
                subscription["subVersion"] = 2**40  # newer than any real client's
        body = json.dumps(document).encode()
        leave = {"clientID": "mallory@1#1", "producerGroup": "", "consumerGroup": self._group}
        try:
            while not self._stopping.is_set():
                joined = await client.request(codes.HEART_BEAT, _signed({}, body), body)
                left = await client.request(codes.UNREGISTER_CLIENT, _signed(leave, b""))
                self.answers += [joined.code, left.code]
                await asyncio.sleep(0.05)
        finally:
            await client.close()


def test_a_user_without_rights_on_a_group_cannot_hijack_a_java_push_consumer(
        java_clients: JavaClients, acl_namesrv: str) -> None:
    topic = new_topic()
    group = f"g-{topic}-push-concurrently"  # the scenario's group (Scenarios.java)
    with Hijacker(acl_namesrv, group=group, topic=topic) as hijacker:
        result = java_clients.run("push-concurrently", namesrv=acl_namesrv, topic=topic,
                                  count=COUNT, mode="sync", **APP)
    assert result["sent"] == COUNT, result
    assert_all_received(result, expected=COUNT)
    assert len(hijacker.answers) >= 20, hijacker.answers
    assert set(hijacker.answers) == {NO_PERMISSION}, hijacker.answers
