"""Request/reply and message trace, with Apache RocketMQ's remoting Java client.

`request-reply` (Reply.java): a requester calls `DefaultMQProducer#request(message, timeout)`
for each of a few messages; a responder (a push consumer of the topic and a producer) answers
each with `MessageUtil.createReplyMessage(request, body)`, which names the topic
`<CLUSTER>_REPLY_TOPIC` after the CLUSTER property the broker stamped on the request.  The
client sends the reply with SEND_REPLY_MESSAGE_V2 (325) and the broker pushes it to the
requester with PUSH_REPLY_MESSAGE_TO_CLIENT (326).

`trace` (Traced.java): a producer and a push consumer created with message trace on send and
consume a few messages; their trace hooks store Pub, SubBefore and SubAfter records in
RMQ_SYS_TRACE_TOPIC, which an assigned lite pull consumer reads back.  The hooks trace only
sends whose response carries MSG_REGION and TRACE_ON, and messages that carry them.

The scenarios give their own verdict (`ok`, `problems`); the tests check the per-message
facts again from the raw records, so a scenario that saw nothing cannot pass.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.remoting_clients.java_clients import JavaClients

pytestmark = pytest.mark.remoting_clients

REQUESTS = 4
REQUEST_TIMEOUT_MS = 5000
TRACED = 5
PUB_FIELDS = 14
"""type timeStamp regionId groupName topic msgId tags keys storeHost bodyLength costTime
msgType offsetMsgId success (TraceDataEncoder, 4.9.8 and 5.5.0)."""


def shown(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)


def check_request(request: dict[str, Any], deliveries: list[dict[str, Any]], topic: str,
                  client_id: str, result: dict[str, Any]) -> None:
    """One request: its own reply, in time, with the request's correlation; the responder
    got the request once, with CLUSTER, and replied to `<CLUSTER>_REPLY_TOPIC`."""
    index = request["index"]
    assert "error" not in request, shown(request)
    assert request["body"] == f"request {index} of {topic}", shown(result)
    assert request["elapsedMs"] < REQUEST_TIMEOUT_MS, shown(request)
    assert request["ttl"] == str(REQUEST_TIMEOUT_MS), shown(request)
    assert request["replyToClient"] == client_id, shown(result)
    reply = request["reply"]
    assert reply["body"] == f"reply to {request['body']}", shown(request)
    properties = reply["properties"]
    assert properties["CORRELATION_ID"] == request["correlationId"], shown(request)
    assert properties["MSG_TYPE"] == "reply", shown(request)
    assert properties["REPLY_TO_CLIENT"] == client_id, shown(request)
    assert properties["TTL"] == str(REQUEST_TIMEOUT_MS), shown(request)
    assert len(deliveries) == 1, shown(result)
    seen = deliveries[0]
    cluster = seen["properties"].get("CLUSTER")
    assert cluster, shown(seen)
    assert seen["properties"]["CORRELATION_ID"] == request["correlationId"], shown(seen)
    assert seen["properties"]["REPLY_TO_CLIENT"] == client_id, shown(seen)
    assert seen["replyTopic"] == f"{cluster}_REPLY_TOPIC" == reply["topic"], shown(result)
    assert seen.get("replyStatus") == "SEND_OK", shown(seen)


def test_each_request_gets_its_own_reply(
        java_clients: JavaClients, namesrv: str, topic: str) -> None:
    """Each of the requests (sync, one after the other) returns the reply to itself."""
    result = java_clients.run("request-reply", namesrv=namesrv, topic=topic, count=REQUESTS,
                              request_timeout_ms=REQUEST_TIMEOUT_MS)
    assert result["warmUpStatus"] == "SEND_OK", shown(result)
    assert result["warmUpReceived"] is True, shown(result)
    requests = result["requests"]
    assert [request["index"] for request in requests] == list(range(REQUESTS)), shown(result)
    responder = {entry["index"]: entry["deliveries"] for entry in result["responder"]}
    for request in requests:
        check_request(request, responder[request["index"]], topic,
                      result["requesterClientId"], result)
    correlation_ids = {request["correlationId"] for request in requests}
    assert len(correlation_ids) == REQUESTS, shown(result)
    # The warm-up is a plain message: the broker stamped CLUSTER, nobody replied to it.
    warm_up = responder[REQUESTS]
    assert len(warm_up) == 1, shown(result)
    assert warm_up[0]["properties"].get("CLUSTER"), shown(result)
    assert "CORRELATION_ID" not in warm_up[0]["properties"], shown(result)
    assert "replyTopic" not in warm_up[0], shown(result)
    assert result["responderStrangers"] == 0, shown(result)
    assert result["replied"] == REQUESTS, shown(result)
    assert result["problems"] == [], shown(result)
    assert result["ok"] is True, shown(result)


def check_trace_records(message: dict[str, Any], send: dict[str, Any], topic: str,
                        result: dict[str, Any]) -> None:
    """One Pub record as sent, one SubBefore and one SubAfter for its one delivery."""
    region = send["regionId"]
    assert len(message["pub"]) == 1, shown(message)
    pub = message["pub"][0]
    assert pub["fields"] == PUB_FIELDS, shown(pub)
    assert pub["topic"] == topic, shown(pub)
    assert pub["groupName"] == result["producerGroup"], shown(pub)
    assert pub["msgId"] == send["msgId"], shown(pub)
    assert pub["offsetMsgId"] == send["offsetMsgId"], shown(pub)
    assert pub["tags"] == send["tags"] and pub["keys"] == send["keys"], shown(pub)
    assert pub["regionId"] == region and pub["success"] == "true", shown(pub)
    assert pub["traceMessageKeyed"] is True, shown(pub)
    assert len(message["subBefore"]) == len(message["subAfter"]) == 1, shown(message)
    before, after = message["subBefore"][0], message["subAfter"][0]
    assert before["groupName"] == result["consumerGroup"], shown(before)
    assert before["regionId"] == region, shown(before)
    assert before["retryTimes"] == "0" and before["keys"] == send["keys"], shown(before)
    assert after["requestId"] == before["requestId"], shown(message)
    assert after["success"] == "true" and after["keys"] == send["keys"], shown(after)


def test_traced_messages_have_pub_and_consume_records(
        java_clients: JavaClients, namesrv: str, topic: str) -> None:
    """Every sent message (by message id) has a Pub, a SubBefore and a SubAfter record in
    RMQ_SYS_TRACE_TOPIC, and was consumed with MSG_REGION and TRACE_ON=true."""
    result = java_clients.run("trace", namesrv=namesrv, topic=topic, count=TRACED)
    sends = result["sends"]
    assert [send["status"] for send in sends] == ["SEND_OK"] * TRACED, shown(result)
    for send in sends:
        assert send["regionId"] and send["traceOn"] is True, shown(send)
    assert result["allConsumed"] is True, shown(result)
    assert result["expected"] == result["received"] == TRACED, shown(result)
    assert result["missingCount"] == result["duplicates"] == 0, shown(result)
    assert result["unexpected"] == result["mismatchCount"] == 0, shown(result)
    read = result["traceRead"]
    assert "routeError" not in read and read["queues"] >= 1, shown(read)
    assert read["completeAfterMs"] is not None, shown(result)
    assert len(result["messages"]) == TRACED, shown(result)
    for message, send in zip(result["messages"], sends, strict=True):
        assert message["msgId"] == send["msgId"], shown(result)
        assert message["deliveries"] == 1, shown(message)
        properties = message["consumedProperties"]
        assert properties["MSG_REGION"] == send["regionId"], shown(message)
        assert properties["TRACE_ON"] == "true", shown(message)
        check_trace_records(message, send, topic, result)
    assert result["traceCounts"] == {"Pub": TRACED, "SubBefore": TRACED,
                                     "SubAfter": TRACED}, shown(result)
    assert result["problems"] == [], shown(result)
    assert result["ok"] is True, shown(result)
