"""A topic of 255 bytes (RocketMQ 5's longest) through `mqstore up`: sent over HTTP and over
RocketMQ's remoting protocol, dispatched, pulled both ways and found by key, while the other
topics go on (issue 26: its consume queue file's name in `creating/` was too long for the
file system, and the indexer stopped for every topic)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mqstore.services.notifier.remoting import codes
from tests.interop.http_calls import http_json, quoted
from tests.remoting.client import RemotingClient, properties, records, send_header
from tests.remoting.up_process import mqstore_up

LONGEST_TOPIC = ("Long-topic_%|" * 20)[:255]
SHORT_TOPIC = "Short"


def test_a_255_byte_topic_through_mqstore_up(tmp_path: Path) -> None:
    assert len(LONGEST_TOPIC.encode()) == 255
    with mqstore_up(tmp_path, settings={"MQSTORE_STORE__TOPIC_SIZE_BYTES_MAX": "255"}) as ports:
        writer, notifier = (f"http://127.0.0.1:{ports[name]}" for name in ("writer", "notifier"))
        for number in range(3):
            put = http_json("POST", f"{writer}/v1/topics/{quoted(LONGEST_TOPIC)}/messages",
                        {"body": f"http-{number}", "keys": [f"key-{number}"], "queue_id": 0})
            assert put["status"] == "PUT_OK", put
            assert http_json("POST", f"{writer}/v1/topics/{SHORT_TOPIC}/messages",
                         {"body": f"short-{number}", "queue_id": 0})["status"] == "PUT_OK"
        asyncio.run(_over_remoting(f"127.0.0.1:{ports['remoting']}"))

        pulled = http_json("GET", f"{notifier}/v1/topics/{quoted(LONGEST_TOPIC)}/queues/0/messages"
                              f"?offset=0&max_messages=32&wait_ms=10000")
        assert pulled["status"] == "FOUND", pulled
        assert [m["queue_offset"] for m in pulled["messages"]] == [0, 1, 2, 3]
        assert {m["topic"] for m in pulled["messages"]} == {LONGEST_TOPIC}
        short = http_json("GET", f"{notifier}/v1/topics/{SHORT_TOPIC}/queues/0/messages"
                             f"?offset=0&max_messages=32&wait_ms=10000")
        assert len(short["messages"]) == 3, short
        found = http_json("GET", f"{notifier}/v1/topics/{quoted(LONGEST_TOPIC)}/messages"
                             f"?key=key-2")
        assert [m["queue_offset"] for m in found["messages"]] == [2]
        status = http_json("GET", f"http://127.0.0.1:{ports['indexer']}/v1/status")
        assert (status["failure"], status["stalled_queues"]) == (None, []), status


async def _over_remoting(address: str) -> None:
    """One SEND_MESSAGE_V2 to the long topic, then a PULL_MESSAGE of it that returns the
    stored records (the three HTTP sends and this one)."""
    client = await RemotingClient.connect(address)
    try:
        sent = await client.request(codes.SEND_MESSAGE_V2, send_header(
            LONGEST_TOPIC, 0, props=properties(KEYS="key-remoting")), b"remoting")
        assert sent.code == codes.SUCCESS, sent.remark
        assert sent.ext_fields["queueOffset"] == "3"
        bodies: list[bytes] = []
        while len(bodies) < 4:  # a pull answers what the notifier has seen dispatched
            pulled = await client.request(codes.PULL_MESSAGE, {
                "consumerGroup": "cg", "topic": LONGEST_TOPIC, "queueId": "0",
                "queueOffset": str(len(bodies)), "maxMsgNums": "32", "sysFlag": str(0x2 | 0x4),
                "commitOffset": "0", "suspendTimeoutMillis": "10000", "subscription": "*",
                "subVersion": "0", "expressionType": "TAG"}, timeout_s=30)
            assert pulled.code == codes.SUCCESS, (pulled.code, pulled.remark)
            bodies += [bytes(m.body) for m in records(pulled.body)]
        assert bodies == [b"http-0", b"http-1", b"http-2", b"remoting"]
    finally:
        await client.close()
