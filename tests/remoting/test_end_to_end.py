"""RocketMQ's remoting protocol against `mqstore up`: routes, sends, held and woken pulls,
offsets, heartbeats, lookups, and the refusals, with the small client in client.py."""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path

from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.frame import SERIALIZE_ROCKETMQ
from tests.remoting.client import (
    RemotingClient,
    batch_body,
    heartbeat,
    properties,
    pull_header,
    records,
    send_header,
)
from tests.remoting.up_process import mqstore_up

TOPIC = "Orders"


def test_a_session_against_mqstore_up(tmp_path: Path) -> None:
    with mqstore_up(tmp_path) as ports:
        asyncio.run(_session(f"127.0.0.1:{ports['remoting']}"))


async def _session(address: str) -> None:
    client = await RemotingClient.connect(address)
    try:
        await _routes(client, address)
        sent = await _sends(client)
        await _pulls(client, sent)
        await _held_pull_woken_by_a_send(client)
        await _offsets_and_consumers(client)
        await _lookups(client, sent)
        await _refusals(client)
    finally:
        await client.close()
    binary = await RemotingClient.connect(address, serialize_type=SERIALIZE_ROCKETMQ)
    try:
        answer = await binary.request(codes.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"})
        assert answer.serialize_type == SERIALIZE_ROCKETMQ
        assert (answer.code, answer.ext_fields["offset"]) == (codes.SUCCESS, "6")
    finally:
        await binary.close()


async def _routes(client: RemotingClient, address: str) -> None:
    missing = await client.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    assert missing.code == codes.TOPIC_NOT_EXIST
    assert TOPIC in (missing.remark or "")
    template = await client.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    route = json.loads(template.body)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": address}
    assert b" " not in template.body  # compact: Go's route parser splits on , and :
    cluster = json.loads((await client.request(codes.GET_BROKER_CLUSTER_INFO)).body)
    assert cluster["clusterAddrTable"] == {"DefaultCluster": ["mqstore"]}


STAMPS = "MSG_REGION\x01DefaultRegion\x02TRACE_ON\x01true\x02CLUSTER\x01DefaultCluster\x02"


async def _sends(client: RemotingClient) -> list[tuple[bytes, str]]:
    """Six messages on queue 0: three single (tags A, B, A), one batch of three (tag C)."""
    sent: list[tuple[bytes, str]] = []
    for index, tag in enumerate(("TagA", "TagB", "TagA")):
        props = properties(TAGS=tag, KEYS=f"order-{index}", UNIQ_KEY=f"AB{index:030X}",
                           region="eu")
        answer = await client.request(codes.SEND_MESSAGE_V2, send_header(TOPIC, 0, props=props),
                                      f"single {index}".encode())
        assert answer.code == codes.SUCCESS, answer.remark
        assert answer.ext_fields["queueOffset"] == str(index)
        assert len(answer.ext_fields["msgId"]) == 32
        # stored with the broker's stamps after the client's own
        # (services/notifier/remoting/stamps.py)
        sent.append((f"single {index}".encode(), props + STAMPS))
    entries = [(f"batch {index}".encode(), properties(TAGS="TagC", UNIQ_KEY=f"CD{index:030X}"))
               for index in range(3)]
    # A 5.x batch carries a UNIQ_KEY of its own: each entry keeps its own, and gets the
    # batch's other properties after its own.
    outer = properties(WAIT="true", UNIQ_KEY="FF" * 16)
    answer = await client.request(codes.SEND_BATCH_MESSAGE,
                                  send_header(TOPIC, 0, props=outer, batch=True),
                                  batch_body(entries))
    assert answer.code == codes.SUCCESS, answer.remark
    assert len(answer.ext_fields["msgId"].split(",")) == 3
    assert answer.ext_fields["queueOffset"] == "3"
    sent += [(body, props + "WAIT\x01true\x02") for body, props in entries]
    route = json.loads((await client.request(codes.GET_ROUTEINFO_BY_TOPIC,
                                             {"topic": TOPIC})).body)
    assert route["queueDatas"][0]["writeQueueNums"] == 4
    return sent


async def _pulls(client: RemotingClient, sent: list[tuple[bytes, str]]) -> None:
    got: list[tuple[bytes, bytes]] = []
    offset = 0
    while len(got) < len(sent):  # the indexer dispatches in the background: hold until then
        answer = await client.request(codes.PULL_MESSAGE,
                                      pull_header(TOPIC, 0, offset, suspend_ms=5000))
        if answer.code == codes.SUCCESS:
            position = 0
            for message in records(answer.body):
                got.append((bytes(message.body),
                            answer.body[position:position + message.total_size]))
                position += message.total_size
        offset = int(answer.ext_fields["nextBeginOffset"])
    assert [body for body, _ in got] == [body for body, _ in sent]
    for (_, record), (_, props) in zip(got, sent, strict=True):
        encoded = props.encode("utf-8")  # the record ends with the properties as stored
        assert record.endswith(struct.pack(">h", len(encoded)) + encoded)
    filtered = await client.request(codes.PULL_MESSAGE, pull_header(
        TOPIC, 0, 0, suspend_ms=0, subscription="TagB || TagC"))
    assert [m.properties["TAGS"] for m in records(filtered.body)] == ["TagB"] + ["TagC"] * 3
    bad = await client.request(codes.PULL_MESSAGE, pull_header(
        TOPIC, 0, 0, suspend_ms=0, subscription="||"))
    assert bad.code == codes.SUBSCRIPTION_PARSE_FAILED


async def _held_pull_woken_by_a_send(client: RemotingClient) -> None:
    held = asyncio.create_task(client.request(
        codes.PULL_MESSAGE, pull_header(TOPIC, 1, 0, suspend_ms=20_000)))
    while await _held_pulls(client) == 0:  # until the server holds it
        assert not held.done()
    assert not held.done()
    answer = await client.request(codes.SEND_MESSAGE_V2, send_header(TOPIC, 1), b"wake up")
    assert answer.code == codes.SUCCESS
    woken = await held
    assert woken.code == codes.SUCCESS
    assert [bytes(m.body) for m in records(woken.body)] == [b"wake up"]


async def _held_pulls(client: RemotingClient) -> int:
    info = await client.request(codes.GET_BROKER_RUNTIME_INFO)
    return int(json.loads(info.body)["table"]["remoteHeldPulls"])


async def _offsets_and_consumers(client: RemotingClient) -> None:
    header = {"consumerGroup": "cg", "topic": TOPIC, "queueId": "0"}
    first = await client.request(codes.QUERY_CONSUMER_OFFSET, header)
    assert (first.code, first.ext_fields["offset"]) == (codes.SUCCESS, "0")  # young queue
    await client.request(codes.UPDATE_CONSUMER_OFFSET, {**header, "commitOffset": "5"},
                         oneway=True)
    stored = await client.request(codes.QUERY_CONSUMER_OFFSET, header)
    assert stored.ext_fields["offset"] == "5"
    beat = await client.request(codes.HEART_BEAT, body=heartbeat("10.0.0.1@1#1", "cg", TOPIC))
    assert beat.code == codes.SUCCESS
    notice = await asyncio.wait_for(client.pushed.get(), 30)  # a consumer joined "cg"
    assert (notice.code, notice.ext_fields, notice.oneway) == (
        codes.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "cg"}, True)
    listed = await client.request(codes.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
    assert json.loads(listed.body) == {"consumerIdList": ["10.0.0.1@1#1"]}
    progress = await client.request(codes.GET_CONSUME_STATS, {"consumerGroup": "cg",
                                                             "topic": TOPIC})
    assert b'"consumerOffset":5' in progress.body
    assert b'{"brokerName":"mqstore","queueId":0,"topic":"Orders"}:' in progress.body
    await client.request(codes.UNREGISTER_CLIENT, {"clientID": "10.0.0.1@1#1"})
    listed = await client.request(codes.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
    assert json.loads(listed.body) == {"consumerIdList": []}


async def _lookups(client: RemotingClient, sent: list[tuple[bytes, str]]) -> None:
    by_key = await client.request(codes.QUERY_MESSAGE, {
        "topic": TOPIC, "key": "order-1", "maxNum": "32", "beginTimestamp": "0",
        "endTimestamp": str(1 << 62)})
    assert by_key.code == codes.SUCCESS, by_key.remark
    [found] = records(by_key.body)
    assert bytes(found.body) == sent[1][0]
    viewed = await client.request(codes.VIEW_MESSAGE_BY_ID,
                                  {"offset": str(found.physical_offset)})
    assert viewed.body == by_key.body
    earliest = await client.request(codes.SEARCH_OFFSET_BY_TIMESTAMP, {
        "topic": TOPIC, "queueId": "0", "timestamp": "0"})
    assert earliest.ext_fields["offset"] == "0"


async def _refusals(client: RemotingClient) -> None:
    unknown = await client.request(9999)
    assert unknown.code == codes.REQUEST_CODE_NOT_SUPPORTED
    assert "9999" in (unknown.remark or "")
    no_topic = await client.request(codes.GET_MAX_OFFSET, {"queueId": "0"})
    assert no_topic.code == codes.SYSTEM_ERROR
    assert "topic" in (no_topic.remark or "")
    bad_queue = await client.request(codes.SEND_MESSAGE_V2, send_header(TOPIC, 99), b"x")
    assert bad_queue.code == codes.SYSTEM_ERROR
    assert "queueId[99]" in (bad_queue.remark or "")
