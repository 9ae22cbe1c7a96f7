"""`send_back_copy`: the copy a consumer's failed message is retried or dead-lettered with.

Shared by the two doors a consumer reports a failure through: the remoting front's
CONSUMER_SEND_MSG_BACK (36, services/notifier/remoting/retries.py) and the HTTP nack
(`POST /v1/groups/{group}/nacks`, services/notifier/nacks.py).  As RocketMQ's
`AbstractSendMessageProcessor#consumerSendMsgBack`:

| the message's reconsume times, the request     | the copy goes to                          |
|------------------------------------------------|-------------------------------------------|
| >= max reconsume times, or delay level < 0     | `%DLQ%<group>` queue 0, `DELAY=0`: kept,  |
|                                                | never delivered again                     |
| otherwise                                      | `%RETRY%<group>` queue 0 with `DELAY` =   |
|                                                | the delay level, or 3 + reconsume times   |
|                                                | when 0 (10 s, 30 s, 1 min, ... by default)|

The copy keeps the message's body, flags, born host and time and properties, adds
`RETRY_TOPIC` (the first topic), `ORIGIN_MESSAGE_ID` (the first delivery's offset msg id)
and `WAIT=false`, and counts one more reconsume time.  It is forwarded "routed": the writer
admits a `%RETRY%` or `%DLQ%` topic from the front alone, stores one with `DELAY` in the
schedule topic until it is due (services/writer/delayed_puts.py), then in the retry topic.
A pure builder: the caller checks the topic's name, sends, and counts.
"""

from __future__ import annotations

from typing import NamedTuple

from mqstore.services.common.links.forward_wire import KIND_ROUTED, ForwardRequest
from mqstore.services.common.topics.rules import DLQ_PREFIX, RETRY_PREFIX
from mqstore.storage.format.delay_levels import PROPERTY_DELAY
from mqstore.storage.format.message import StoredMessage
from mqstore.storage.format.properties import PROPERTY_WAIT_STORE_OK, encode_properties

PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
FIRST_RETRY_LEVEL = 3
"""A send-back with delay level 0 waits level 3 + reconsume times (10 s, 30 s, ...)."""
HOST_FAMILY_BITS = 0x30
"""The sysflag bits of the born and store hosts' address families: the writer sets them
again from the copy's own hosts."""


def first_topic(original: StoredMessage) -> str:
    """The topic the message was first sent to (a retry copy's `RETRY_TOPIC`)."""
    return original.properties.get(PROPERTY_RETRY_TOPIC, original.topic)


class SendBack(NamedTuple):
    forward: ForwardRequest
    """The copy, as the writer's forward link carries it."""
    delay_level: int
    """The delay level the copy waits; 0 for a dead letter (never delivered again)."""

    @property
    def dead_letter(self) -> bool:
        return self.forward.topic.startswith(DLQ_PREFIX)


def send_back_copy(original: StoredMessage, group: str, *, delay_level: int,
                   max_reconsume_times: int) -> SendBack:
    """The copy that stores `original` again for `group`: in its retry topic with the delay
    level it waits, or in its dead letter queue (the table above)."""
    properties = dict(original.properties)
    properties.setdefault(PROPERTY_RETRY_TOPIC, original.topic)
    properties.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, original.msg_id)
    properties[PROPERTY_WAIT_STORE_OK] = "false"
    if original.reconsume_times >= max_reconsume_times or delay_level < 0:
        topic, level = DLQ_PREFIX + group, 0
    else:
        topic, level = RETRY_PREFIX + group, \
            delay_level or FIRST_RETRY_LEVEL + original.reconsume_times
    properties[PROPERTY_DELAY] = str(level)
    return SendBack(ForwardRequest(
        0, KIND_ROUTED, 0, original.sysflag & ~HOST_FAMILY_BITS, original.flag,
        original.born_timestamp_ms, original.reconsume_times + 1, original.born_host, topic,
        encode_properties(properties), bytes(original.body)), level)
