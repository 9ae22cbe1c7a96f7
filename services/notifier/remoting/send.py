"""Sends: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

The front reads the header fields the store needs (topic, queue id, flags, born time,
reconsume times) and forwards the body and the properties string as the client encoded
them, with the broker's stamps appended (stamps.py), to the writer (writer_link.py); a
batch body goes as it arrived and the writer splits its entries.  Nothing is re-encoded.
Sync, async and oneway sends are the same request to the server: a oneway one (flag bit 1)
is stored and not answered.

| situation                                      | code                  |
|------------------------------------------------|-----------------------|
| stored                                         | 0 SUCCESS             |
| stored, sync flush or follower not confirmed   | 10 / 12 / 11          |
| unknown topic, no auto-create (`topics.auto_  | 17 TOPIC_NOT_EXIST    |
| create` off), deleted, or past `topics_max`    |                       |
| the broker or the topic not writable           | 16 NO_PERMISSION      |
| (`brokerPermission`, the topic's `perm`)       |                       |
| system topic, `%DLQ%`, `%RETRY%` but not a     | 16 NO_PERMISSION      |
| send-back (the writer's topic_gate.py)         |                       |
| `%RETRY%g` past the max reconsume times        | stored in `%DLQ%g`    |
|                                                | (retries.py)          |
| queue id ≥ the topic's write queues            | 1 SYSTEM_ERROR        |
| empty body, bad topic, too large               | 13 MESSAGE_ILLEGAL    |
| transaction half message (not a batch)         | stored as a half      |
|                                                | (transactions.py)     |
| writer busy or unreachable                     | 2 SYSTEM_BUSY / 1     |
"""

from __future__ import annotations

from mqstore.services.common.links.forward_wire import (
    KIND_BATCH,
    KIND_ROUTED,
    KIND_SINGLE,
    ForwardAnswer,
    ForwardRequest,
)
from mqstore.services.common.topics.rules import RETRY_PREFIX, TRANSACTION_HALF_TOPIC
from mqstore.services.notifier.remoting import headers, retries, transactions
from mqstore.services.notifier.remoting.codes import (
    FLUSH_DISK_TIMEOUT,
    FLUSH_SLAVE_TIMEOUT,
    MESSAGE_ILLEGAL,
    NO_PERMISSION,
    SEND_BATCH_MESSAGE,
    SEND_REPLY_MESSAGE,
    SEND_REPLY_MESSAGE_V2,
    SERVICE_NOT_AVAILABLE,
    SLAVE_NOT_AVAILABLE,
    SUCCESS,
    SYSTEM_ERROR,
    TOPIC_NOT_EXIST,
    RemotingError,
)
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.topics import TopicConfig
from mqstore.storage.files.topics_file import PERM_WRITE
from mqstore.storage.format.message import offset_msg_id

STATUS_CODES = {"PUT_OK": SUCCESS, "FLUSH_DISK_TIMEOUT": FLUSH_DISK_TIMEOUT,
                "FLUSH_SLAVE_TIMEOUT": FLUSH_SLAVE_TIMEOUT,
                "SLAVE_NOT_AVAILABLE": SLAVE_NOT_AVAILABLE, "MESSAGE_ILLEGAL": MESSAGE_ILLEGAL,
                "SERVICE_NOT_AVAILABLE": SERVICE_NOT_AVAILABLE,
                "TOPIC_NOT_EXIST": TOPIC_NOT_EXIST, "NO_PERMISSION": NO_PERMISSION}
"""The store's statuses as RocketMQ's `SendMessageProcessor` maps them; the rest (busy
page cache, a failed segment) is SYSTEM_ERROR."""
TRANSACTION_PREPARED = 0x4
REPLY_CODES = frozenset((SEND_REPLY_MESSAGE, SEND_REPLY_MESSAGE_V2))



async def send(front: Front, request: Command, peer: Peer) -> Command | None:
    forward = forward_of(front, request, peer)
    return answer_of(front, request, forward, await front.link.send(forward))


def forward_of(front: Front, request: Command, peer: Peer) -> ForwardRequest:
    """What to forward to the writer for a send (RemotingError: the send's refusal)."""
    topic = headers.text(request, "topic", "b")
    front.topics.check_name(topic)
    if not front.topics.broker_permission & PERM_WRITE:  # RocketMQ's order and remarks
        raise RemotingError(NO_PERMISSION, f"the broker[{front.settings.broker_name}, "
                                           f"{front.broker_address}] sending message is "
                                           f"forbidden")
    config = _topic(front, request, topic)
    if not config.perm & PERM_WRITE:
        raise RemotingError(NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
    queue_id = headers.queue_id(request, "queueId", "e")
    if queue_id < 0:  # round robin per topic, as the writer's HTTP produce
        queue_id = front.queues.choose(topic, queue_count=config.write_queue_nums)
    if queue_id >= config.write_queue_nums:
        raise RemotingError(SYSTEM_ERROR, f"request queueId[{queue_id}] is illegal, topic "
                                          f"{topic} has {config.write_queue_nums} write queues")
    sysflag = headers.number(request, "sysFlag", "f", minimum=0, maximum=headers.INT32_MAX)
    if sysflag & TRANSACTION_PREPARED and request.code == SEND_BATCH_MESSAGE:
        raise RemotingError(MESSAGE_ILLEGAL, "a batch cannot be a transaction's half message")
    if not request.body:
        raise RemotingError(MESSAGE_ILLEGAL, "the message body is empty")
    properties = (headers.optional_text(request, "properties", "i") or "").encode("utf-8")
    if request.code != SEND_BATCH_MESSAGE:
        properties = front.stamps.stamped(properties, reply=request.code in REPLY_CODES)
    forward = ForwardRequest(
        0, KIND_BATCH if request.code == SEND_BATCH_MESSAGE else KIND_SINGLE, queue_id,
        sysflag & ~0x30,
        headers.number(request, "flag", "h", minimum=headers.INT32_MIN,
                       maximum=headers.INT32_MAX),
        headers.number(request, "bornTimestamp", "g"),
        headers.number(request, "reconsumeTimes", "j", minimum=0,
                       maximum=headers.INT32_MAX, default=0),
        peer.address, topic, properties, bytes(request.body))
    if sysflag & TRANSACTION_PREPARED:  # a transaction's half (transactions.py)
        forward = transactions.half_of(forward)
        if forward.kind == KIND_ROUTED:
            return forward
    if topic.startswith(RETRY_PREFIX):  # a consumer's own send-back (retries.py)
        return retries.dead_letter_if_spent(front, request, forward)
    return forward


def answer_of(front: Front, request: Command, forward: ForwardRequest,
              answer: ForwardAnswer) -> Command:
    """The client's answer to a send the writer answered."""
    code = STATUS_CODES.get(answer.status, SYSTEM_ERROR)
    if not answer.results:
        raise RemotingError(code if code != SUCCESS else SYSTEM_ERROR,
                            f"{answer.status}: {answer.reason}")
    host = front.store_host_packed
    ext = {"msgId": ",".join(offset_msg_id(host, physical) for _, physical, _ in
                             answer.results),
           "queueId": str(forward.queue_id), "queueOffset": str(answer.results[0][0]),
           "MSG_REGION": front.stamps.region_id, "TRACE_ON": front.stamps.trace_on}
    if forward.topic == TRANSACTION_HALF_TOPIC:  # the queue asked for, the transaction id
        ext.update(transactions.half_answer_fields(forward))
    return request.answer(code, ext_fields=ext,
                          remark=answer.reason or None if code != SUCCESS else None)


def _topic(front: Front, request: Command, topic: str) -> TopicConfig:
    config = front.topics.get(topic)
    if config is not None:
        return config
    template = headers.optional_text(request, "defaultTopic", "c")
    if not front.settings.topic_auto_create_enabled or template is None or \
            front.topics.get(template) is None:
        raise RemotingError(TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
    queue_nums = headers.number(request, "defaultTopicQueueNums", "d", minimum=1,
                                maximum=headers.INT32_MAX, default=4)
    config = front.topics.default(topic, queue_nums)
    front.topics.create(config)
    return config
