"""Each handler on its own, over an empty store directory: what it answers, and how it
refuses bad input (a RocketMQ code with a remark, never an exception or silence)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.services.notifier.remoting.service import RemotingFront
from mqstore.storage import ConfigError, StoreConfig
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView
from tests.remoting.client import heartbeat

PEER = Peer("10.0.0.9:50000", 1)


@pytest.fixture
def front(tmp_path: Path) -> Iterator[Front]:
    view = StoreView.open(tmp_path, StoreConfig(store_host="127.0.0.1:9876"))
    try:
        offsets = ConsumerOffsets(tmp_path, lock_timeout_ms=1000)
        yield RemotingFront(view, offsets, RemotingSettings(port=0),
                            queue_count_max=8).front
    finally:
        view.close()


def ask(front: Front, code: int, ext: dict[str, str] | None = None, body: bytes = b"",
        peer: Peer = PEER) -> Command:
    answer = asyncio.run(answer_to(front, Command(code, 11, 0, dict(ext or {}), body), peer))
    assert answer is not None
    assert (answer.opaque, answer.flag) == (11, 1)
    return answer


def test_an_unknown_code_is_not_supported_with_a_remark(front: Front) -> None:
    answer = ask(front, 4242)
    assert answer.code == codes.REQUEST_CODE_NOT_SUPPORTED
    assert answer.remark == " request type 4242 not supported"


def test_a_missing_or_malformed_field_names_it(front: Front) -> None:
    missing = ask(front, codes.GET_MIN_OFFSET, {"topic": "t"})
    assert (missing.code, missing.remark) == (codes.SYSTEM_ERROR,
                                              "the custom field <queueId> is null (request "
                                              "code 31)")
    malformed = ask(front, codes.GET_MIN_OFFSET, {"topic": "t", "queueId": "one"})
    assert malformed.code == codes.SYSTEM_ERROR
    assert "<queueId> must be an integer" in (malformed.remark or "")


def test_responses_sent_to_the_server_are_ignored(front: Front) -> None:
    stray = Command(0, 5, 1)
    assert asyncio.run(answer_to(front, stray, PEER)) is None


def test_topics_are_created_routed_listed_and_deleted(front: Front) -> None:
    assert ask(front, codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Pay"}).code == \
        codes.TOPIC_NOT_EXIST
    created = ask(front, codes.UPDATE_AND_CREATE_TOPIC, {
        "topic": "Pay", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
        "defaultTopic": "TBW102", "topicFilterType": "SINGLE_TAG"})
    assert created.code == codes.SUCCESS
    route = json.loads(ask(front, codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Pay"}).body)
    assert route["queueDatas"] == [{"brokerName": "mqstore", "perm": 6, "readQueueNums": 2,
                                    "topicSysFlag": 0, "writeQueueNums": 2}]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:9876"}
    listed = json.loads(ask(front, codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body)
    assert listed == {"topicList": ["DefaultCluster_REPLY_TOPIC", "Pay"]}  # replies: always
    assert ask(front, codes.DELETE_TOPIC_IN_BROKER, {"topic": "Pay"}).code == codes.SUCCESS
    assert ask(front, codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Pay"}).code == \
        codes.TOPIC_NOT_EXIST


def test_system_topics_cannot_be_created_or_deleted(front: Front) -> None:
    for topic in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_wheel_timer"):
        answer = ask(front, codes.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"})
        assert answer.code == codes.SYSTEM_ERROR  # as RocketMQ's broker answers it
        assert "conflict with system topic" in (answer.remark or "")
    assert ask(front, codes.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"}).code == codes.SUCCESS
    assert ask(front, codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}).code == \
        codes.SUCCESS  # still routed: auto-creation needs its template


def test_more_queues_than_the_writer_takes_are_refused(front: Front) -> None:
    answer = ask(front, codes.UPDATE_AND_CREATE_TOPIC, {
        "topic": "Big", "readQueueNums": "16", "writeQueueNums": "16", "perm": "6"})
    assert answer.code == codes.SYSTEM_ERROR
    assert "outside [1, 8]" in (answer.remark or "")


def test_a_group_is_told_when_its_members_change(front: Front) -> None:
    pushed: list[tuple[int, Command]] = []
    front.push = lambda connection_id, command: pushed.append((connection_id, command)) is None
    # a change is told at once when the group was not told within notify_debounce_ms
    # (coalescing within it: tests/abuse/test_remoting_heartbeats.py)
    front.settings = dataclasses.replace(front.settings, notify_debounce_ms=1)
    ask(front, codes.HEART_BEAT, body=heartbeat("a@1", "cg", "t"), peer=Peer("h:1", 1))
    ask(front, codes.HEART_BEAT, body=heartbeat("a@1", "cg", "t"), peer=Peer("h:1", 1))
    assert [connection for connection, _ in pushed] == [1]  # joined once; renewals are quiet
    time.sleep(0.005)
    ask(front, codes.HEART_BEAT, body=heartbeat("b@2", "cg", "t"), peer=Peer("h:2", 2))
    assert sorted(connection for connection, _ in pushed[1:]) == [1, 2]
    assert {command.code for _, command in pushed} == {codes.NOTIFY_CONSUMER_IDS_CHANGED}
    assert pushed[-1][1].ext_fields == {"consumerGroup": "cg"}
    time.sleep(0.005)
    ask(front, codes.UNREGISTER_CLIENT, {"clientID": "b@2"})
    assert pushed[-1][0] == 1  # the one left is told
    front.topics.create(front.topics.default("t", 2))
    ask(front, codes.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": "t", "group": "cg",
                                                     "timestamp": "0", "isForce": "true"})
    connection, reset = pushed[-1]
    assert (connection, reset.code, reset.oneway) == (1, 220, True)
    assert reset.body == (b'{"offsetTable":{{"brokerName":"mqstore","queueId":0,"topic":"t"}:0,'
                          b'{"brokerName":"mqstore","queueId":1,"topic":"t"}:0}}')


def test_heartbeats_build_the_consumer_list_and_a_closed_connection_leaves_it(
        front: Front) -> None:
    for connection_id, client_id in ((1, "b@2"), (2, "a@1")):
        beat = ask(front, codes.HEART_BEAT, body=heartbeat(client_id, "cg", "t", "x || y"),
                   peer=Peer("10.0.0.9:1", connection_id))
        assert beat.code == codes.SUCCESS
    listed = ask(front, codes.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
    assert json.loads(listed.body) == {"consumerIdList": ["a@1", "b@2"]}
    subscription = front.clients.subscription("cg", "t")
    assert subscription is not None
    assert subscription.expression == "x || y"
    front.clients.connection_closed(2)
    listed = ask(front, codes.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
    assert json.loads(listed.body) == {"consumerIdList": ["b@2"]}


def test_a_heartbeat_that_is_not_json_is_refused(front: Front) -> None:
    answer = ask(front, codes.HEART_BEAT, body=b"{not json")
    assert answer.code != codes.SUCCESS
    assert "heartbeat body is not JSON" in (answer.remark or "")
    no_id = ask(front, codes.HEART_BEAT, body=b'{"consumerDataSet":[]}')
    assert (no_id.code, no_id.remark) == (codes.SYSTEM_ERROR,
                                          "heartbeat: clientID must be a non-empty string")


def test_orderly_locks_go_to_one_client_until_it_unlocks(front: Front) -> None:
    queues = [{"topic": "t", "brokerName": "mqstore", "queueId": queue_id}
              for queue_id in (0, 1)]

    def lock(client_id: str, code: int = codes.LOCK_BATCH_MQ) -> Command:
        body = json.dumps({"consumerGroup": "cg", "clientId": client_id,
                           "onlyThisBroker": False, "mqSet": queues}).encode()
        return ask(front, code, body=body)

    assert json.loads(lock("a").body)["lockOKMQSet"] == [
        {"brokerName": "mqstore", "queueId": 0, "topic": "t"},
        {"brokerName": "mqstore", "queueId": 1, "topic": "t"}]
    assert json.loads(lock("b").body) == {"lockOKMQSet": []}
    assert lock("a", codes.UNLOCK_BATCH_MQ).code == codes.SUCCESS
    assert len(json.loads(lock("b").body)["lockOKMQSet"]) == 2


def test_a_pull_on_an_unknown_topic_and_a_bad_queue(front: Front) -> None:
    header = {"consumerGroup": "cg", "topic": "Nope", "queueId": "0", "queueOffset": "0",
              "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0",
              "suspendTimeoutMillis": "0", "subVersion": "0"}
    assert ask(front, codes.PULL_MESSAGE, header).code == codes.TOPIC_NOT_EXIST
    bad_queue = ask(front, codes.PULL_MESSAGE, {**header, "topic": "TBW102", "queueId": "99"})
    assert bad_queue.code == codes.SYSTEM_ERROR  # version 401 (4.9.4); 5.x gets 29
    sql = ask(front, codes.PULL_MESSAGE, {**header, "topic": "TBW102", "sysFlag": "4",
                                          "subscription": "a >",
                                          "expressionType": "SQL92"})
    assert sql.code == codes.SUBSCRIPTION_PARSE_FAILED  # served, but it does not compile


def test_a_send_without_the_writer_answers_an_error_with_a_remark(front: Front) -> None:
    header = {"a": "pg", "b": "TBW102", "c": "TBW102", "d": "4", "e": "0", "f": "0",
              "g": "0", "h": "0"}
    answer = ask(front, codes.SEND_MESSAGE_V2, header, b"body")
    assert answer.code == codes.SYSTEM_ERROR  # nothing listens at 127.0.0.1:8085 here
    assert "writer" in (answer.remark or "")
    empty = ask(front, codes.SEND_MESSAGE_V2, header, b"")
    assert empty.code == codes.MESSAGE_ILLEGAL
    half = ask(front, codes.SEND_MESSAGE_V2, {**header, "f": "4"}, b"x")
    # A transaction's half is forwarded as any send (services/notifier/remoting/transactions.py)
    assert half.code == codes.SYSTEM_ERROR


def test_every_bound_is_checked() -> None:
    with pytest.raises(ConfigError, match="held_pulls_max"):
        RemotingSettings(held_pulls_max=0)
    with pytest.raises(ConfigError, match="writer_address"):
        RemotingSettings(writer_address="nowhere")


def test_a_pull_past_held_pulls_max_is_busy_not_a_spin(tmp_path: Path) -> None:
    view = StoreView.open(tmp_path, StoreConfig())
    try:
        front = RemotingFront(view, ConsumerOffsets(tmp_path, lock_timeout_ms=1000),
                              RemotingSettings(port=0, held_pulls_max=1),
                              queue_count_max=8).front
        header = {"consumerGroup": "cg", "topic": "TBW102", "queueId": "0",
                  "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "2",
                  "commitOffset": "0", "suspendTimeoutMillis": "20000", "subVersion": "0"}

        async def two_pulls() -> Command | None:
            first = asyncio.ensure_future(answer_to(front, Command(11, 1, 0, header), PEER))
            while front.held.held_count == 0:
                await asyncio.sleep(0)
            second = await answer_to(front, Command(11, 2, 0, header), PEER)
            front.held.close()  # answers the first
            assert (await first) is not None
            return second

        second = asyncio.run(two_pulls())
        assert second is not None
        assert second.code == codes.SYSTEM_BUSY
        assert second.remark == ("[OVERLOAD] 1 pulls are held already "
                                 "(remoting.held_pulls_max=1)")
    finally:
        view.close()
