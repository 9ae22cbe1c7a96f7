"""Request-reply: SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325).

A requester (`DefaultMQProducer#request`) sends a plain message carrying `CORRELATION_ID`,
`REPLY_TO_CLIENT` (its client id) and `TTL`; the front stamps it with `CLUSTER`
(stamps.py).  The responder's `MessageUtil.createReplyMessage` makes a reply to the topic
`<CLUSTER>_REPLY_TOPIC` and sends it with 324/325.  As RocketMQ's `ReplyMessageProcessor`:

| the reply                                          | answer to the responder             |
|----------------------------------------------------|-------------------------------------|
| no `REPLY_TO_CLIENT`                               | 1 `reply message properties[        |
|                                                    | REPLY_TO_CLIENT] is null`           |
| its client has no connection here (it heartbeats   | 1 `push reply message fail, channel |
| as a producer: the client table)                   | of <id> not found.`                 |
| pushed (PUSH_REPLY_MESSAGE_TO_CLIENT, 326, on the  | 0; also stored in the reply topic   |
| requester's connection), answered 0                | (`remoting.reply_store_enabled`),   |
|                                                    | whose msgId and offset are answered |
| the push not answered 0 within                     | 1 `push reply message to <id>fail.` |
| `remoting.reply_push_timeout_ms`                   |                                     |

The push carries the reply's header fields, its body and its properties with
`PUSH_REPLY_TIME`; it waits for the requester's answer (server_calls.py), never blocking
the loop.  A failed store does not change the code: the requester has its reply.
"""

from __future__ import annotations

import time

from mqstore.services.notifier.remoting import send
from mqstore.services.notifier.remoting.codes import (
    PUSH_REPLY_MESSAGE_TO_CLIENT,
    SUCCESS,
    SYSTEM_ERROR,
    RemotingError,
)
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server_calls import CallRefused
from mqstore.storage.format.properties import decode_properties, encode_properties

PROPERTY_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PUSHED_FIELDS = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums",
                 "queueId", "sysFlag", "bornTimestamp", "flag", "reconsumeTimes", "unitMode")
"""The reply's send header fields the push repeats (`ReplyMessageRequestHeader`)."""
V2_ALIASES = {"producerGroup": "a", "topic": "b", "defaultTopic": "c",
              "defaultTopicQueueNums": "d", "queueId": "e", "sysFlag": "f",
              "bornTimestamp": "g", "flag": "h", "reconsumeTimes": "j", "unitMode": "k"}
"""SEND_REPLY_MESSAGE_V2 names them as SEND_MESSAGE_V2 does (`SendMessageRequestHeaderV2`)."""


async def send_reply(front: Front, request: Command, peer: Peer) -> Command:
    """SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325)."""
    forward = send.forward_of(front, request, peer)
    properties = decode_properties(forward.properties)
    requester = properties.get(PROPERTY_REPLY_TO_CLIENT)
    if not requester:
        raise RemotingError(SYSTEM_ERROR, "reply message properties[REPLY_TO_CLIENT] is null")
    connection_id = front.clients.connection_of(requester)
    if connection_id is None:
        raise RemotingError(SYSTEM_ERROR, f"push reply message fail, channel of {requester} "
                                          f"not found.")
    now_ms = int(time.time() * 1000)
    properties[PROPERTY_PUSH_REPLY_TIME] = str(now_ms)
    encoded = encode_properties(properties)
    fields = {name: value for name in PUSHED_FIELDS
              if (value := request.ext_fields.get(name, request.ext_fields.get(
                  V2_ALIASES.get(name, ""), ""))) != ""}
    fields.update({"topic": forward.topic, "queueId": str(forward.queue_id),
                   "properties": encoded.decode("utf-8"), "bornHost": peer.address,
                   "storeHost": front.store_host, "storeTimestamp": str(now_ms)})
    push = Command(PUSH_REPLY_MESSAGE_TO_CLIENT, next(front.opaques), ext_fields=fields,
                   body=forward.body)
    try:
        answer = await front.calls.call(front.push, connection_id, push,
                                        timeout_ms=front.settings.reply_push_timeout_ms)
    except CallRefused as error:
        raise RemotingError(SYSTEM_ERROR, f"push reply message to {requester}fail. "
                                          f"({error})") from None
    if answer.code != SUCCESS:
        raise RemotingError(SYSTEM_ERROR, f"push reply message to {requester}fail. "
                                          f"(answered {answer.code}: {answer.remark})")
    pushed = request.answer(SUCCESS, ext_fields={
        "msgId": "0", "queueId": str(forward.queue_id), "queueOffset": "0",
        "MSG_REGION": front.stamps.region_id, "TRACE_ON": front.stamps.trace_on})
    if not front.settings.reply_store_enabled:
        return pushed
    stored = forward._replace(properties=encoded)
    try:
        return send.answer_of(front, request, stored, await front.link.send(stored))
    except (RemotingError, ConnectionError, TimeoutError):
        return pushed
