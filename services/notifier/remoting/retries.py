"""Retries and dead letters: CONSUMER_SEND_MSG_BACK (36), and sends to `%RETRY%<group>`.

A push consumer whose listener fails a message sends it back (36: the message's commit log
`offset`, its `group`, a `delayLevel`, the client's `maxReconsumeTimes`).  The front reads
the message at the offset and forwards the copy services/notifier/send_backs.py builds (as
RocketMQ's `AbstractSendMessageProcessor#consumerSendMsgBack`): to `%RETRY%<group>` waiting
`delayLevel`, or 3 + reconsume times when 0 (10 s, 30 s, 1 min, ... by default); to
`%DLQ%<group>` once its reconsume times reach the max (the header's `maxReconsumeTimes`,
else `remoting.retry_max_times`) or for a delay level < 0.  Push consumers subscribe to
their retry topic by themselves.  An offset that holds no message answers 1 SYSTEM_ERROR
`look message by offset failed`; the client then sends the message to `%RETRY%<group>`
itself, a plain send carrying `RECONSUME_TIME` and `MAX_RECONSUME_TIMES`, whose header says
how often it was consumed: past the max (`dead_letter_if_spent`) the front routes that send
to the dead letter queue too.  So no path redelivers without bound.

Dead letter and retry topics have one queue, as RocketMQ's (`DLQ_NUMS_PER_GROUP`, the
group's `retryQueueNums`); a dead letter topic is routed once it holds a message, so
`mqadmin` and a pull consumer read it.

Each send-back is counted by outcome, and each message sent to a dead letter queue by its
path (retry_counts.py): the notifier's `mqstore_remoting_send_backs_total{outcome}` and
`mqstore_remoting_dead_letters_total{path}`, which the chart's DLQ alert watches.
"""

from __future__ import annotations

from mqstore.services.common.links.forward_wire import KIND_ROUTED, KIND_SINGLE, ForwardRequest
from mqstore.services.common.topics.rules import DLQ_PREFIX, RETRY_PREFIX
from mqstore.services.notifier.remoting import headers
from mqstore.services.notifier.remoting.codes import SUCCESS, SYSTEM_ERROR, RemotingError
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.send_backs import first_topic, send_back_copy
from mqstore.storage import CorruptRecordError, NoRecordError
from mqstore.storage.format.delay_levels import PROPERTY_DELAY
from mqstore.storage.format.properties import decode_properties, encode_properties

MAX_RECONSUME_TIMES_FROM_VERSION = 121
"""RocketMQ V3_4_9: clients from it on send their `maxReconsumeTimes`."""


async def send_back(front: Front, request: Command, peer: Peer) -> Command:
    """CONSUMER_SEND_MSG_BACK (36), counted by outcome (retry_counts.py)."""
    try:
        topic = await _sent_back(front, request)
    except Exception:  # any answer but SUCCESS: the client sends the message itself
        front.retry_counts.send_back("refused")
        raise
    if topic.startswith(DLQ_PREFIX):
        front.topics.add_dead_letter_topic(topic)
        front.retry_counts.send_back("dead_letter")
    else:
        front.retry_counts.send_back("retry")
    return request.answer(SUCCESS)


async def _sent_back(front: Front, request: Command) -> str:
    """Store the copy a send-back asks for; the topic it went to."""
    offset = headers.number(request, "offset", minimum=0)
    group = headers.text(request, "group")
    front.topics.check_name(RETRY_PREFIX + group)
    delay_level = headers.number(request, "delayLevel", minimum=headers.INT32_MIN,
                                 maximum=headers.INT32_MAX, default=0)
    origin_topic = headers.optional_text(request, "originTopic")
    try:
        original = front.view.message_at(offset)
    except (NoRecordError, CorruptRecordError) as error:
        raise RemotingError(SYSTEM_ERROR, f"look message by offset failed, {offset}: "
                                          f"{error}") from None
    if origin_topic is not None and origin_topic not in (first_topic(original),
                                                         original.topic):
        raise RemotingError(SYSTEM_ERROR, f"the message at offset {offset} is of topic "
                                          f"{first_topic(original)}, not originTopic "
                                          f"{origin_topic}")
    copy = send_back_copy(original, group, delay_level=delay_level,
                          max_reconsume_times=max_reconsume_times(front, request))
    front.topics.check_name(copy.forward.topic)
    answer = await front.link.send(copy.forward)
    if not answer.results:
        raise RemotingError(SYSTEM_ERROR, f"{answer.status}: {answer.reason}")
    topic = copy.forward.topic
    return topic


def max_reconsume_times(front: Front, request: Command, *aliases: str) -> int:
    """The client's `maxReconsumeTimes` (from version 121), else the broker's default."""
    if request.version >= MAX_RECONSUME_TIMES_FROM_VERSION:
        asked = headers.optional_text(request, "maxReconsumeTimes", *aliases)
        if asked is not None:
            return headers.number(request, "maxReconsumeTimes", *aliases,
                                  minimum=headers.INT32_MIN, maximum=headers.INT32_MAX)
    return front.settings.retry_max_times


def dead_letter_if_spent(front: Front, request: Command,
                         forward: ForwardRequest) -> ForwardRequest:
    """A send to `%RETRY%<group>` (a client's own send-back) whose header's reconsume times
    are past the max goes to `%DLQ%<group>` queue 0 (`SendMessageProcessor#handleRetryAndDLQ`,
    5.x: "> max"), with `DELAY=-1`; any other send as it is."""
    if forward.kind != KIND_SINGLE or \
            forward.reconsume_times <= max_reconsume_times(front, request, "l"):
        return forward
    topic = DLQ_PREFIX + forward.topic[len(RETRY_PREFIX):]
    front.topics.check_name(topic)
    properties = decode_properties(forward.properties)
    properties[PROPERTY_DELAY] = "-1"
    front.retry_counts.retry_send_dead_lettered()
    front.topics.add_dead_letter_topic(topic)
    return forward._replace(kind=KIND_ROUTED, queue_id=0, topic=topic,
                            properties=encode_properties(properties))
