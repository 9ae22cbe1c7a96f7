"""Transactional messages: the half send, END_TRANSACTION (37), op messages.

RocketMQ's `TransactionMQProducer` sends a *half* (a send with `TRAN_MSG=true`, `PGROUP`
and sysflag bit 0x4), runs its local transaction, then tells the broker COMMIT (8),
ROLLBACK (12) or nothing yet (0) with END_TRANSACTION, oneway.  As RocketMQ 5.5.0
(`SendMessageProcessor`, `TransactionalMessageBridge#parseHalfMessageInner`,
`EndTransactionProcessor`, `TransactionalMessageServiceImpl#deletePrepareMessage`), every
record in RocketMQ's layout, so either broker reading the volume sees the same state:

| step                 | what the front forwards to the writer (routed)                   |
|----------------------|------------------------------------------------------------------|
| half send            | `RMQ_SYS_TRANS_HALF_TOPIC` queue 0, transaction bits 0 (so it    |
|                      | has a queue entry), `REAL_TOPIC`, `REAL_QID`, `__transactionId__` |
|                      | (= UNIQ_KEY) added; answered with the half's offset msg id and   |
|                      | half-queue offset, the queue asked for and the transaction id    |
| 37 commit            | the real message: `REAL_TOPIC`/`REAL_QID`, bits 0x8, the half's  |
|                      | body, flag, born host and time and properties but `REAL_*`       |
|                      | (`TRAN_MSG`, `PGROUP` stay); then the op message                 |
| 37 rollback          | the op message only                                              |
| op message           | `RMQ_SYS_TRANS_OP_HALF_TOPIC` queue 0, tag `d`, `WAIT=true`,     |
|                      | body `"<half queue offset>,"`                                    |

A 37 whose half cannot be read within `remoting.transaction_end_wait_ms`, or whose
producer group, half-queue offset or commit log offset do not match the half, changes
nothing (RocketMQ's checks; the answer is never seen: 37 is oneway); the half is checked
later (transaction_check.py).  An unknown state (0) is not answered, as RocketMQ.  Each
37 is counted by outcome (transaction_counts.py): the notifier's
`mqstore_remoting_transaction_ends_total{outcome, from_check}`.

Crashes.  Each step is one put the writer answers before the next is sent, and the op
message, the only record that ends a half, is always last:

| crash after                       | afterwards                                         |
|-----------------------------------|----------------------------------------------------|
| the half, before 37               | no op: the check service asks the producer         |
| a rollback's decision, before its | no op: checked, the producer answers rollback      |
| op                                | again; nothing was ever put in the real topic      |
| a commit's real message, before   | no op: checked, the producer answers commit again; |
| its op                            | that 37 (`fromTransactionCheck`) finds the commit  |
|                                   | already stored (the index: `<topic>#UNIQ_KEY`, a   |
|                                   | record with bits 0x8 and the same transaction id)  |
|                                   | and writes only the op: delivered once             |
| the op                            | done: the half is never checked                    |

So a committed message is never lost (its half stays until its op, which follows the real
message), and a rolled-back one is never delivered (a rollback puts nothing in the real
topic).  Without the message index (`store.index_enabled` off) the dedup above
cannot look, and a commit interrupted by a crash is delivered twice: at least once, as
RocketMQ.  What is not done as RocketMQ: the committed record's `PREPAREDTXOFFSET` is 0
(the forward link carries no such field; nothing reads it), op messages are written one
per 37 rather than batched every 3 s, and a half may not be a batch (RocketMQ's producer
never sends one).
"""

from __future__ import annotations

import asyncio
import logging
import time

from mqstore.services.common.links.forward_wire import KIND_ROUTED, ForwardAnswer, ForwardRequest
from mqstore.services.common.topics.rules import TRANSACTION_HALF_TOPIC, TRANSACTION_OP_TOPIC
from mqstore.services.notifier.remoting import headers
from mqstore.services.notifier.remoting.codes import (
    ILLEGAL_OPERATION,
    SUCCESS,
    SYSTEM_ERROR,
    RemotingError,
)
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.storage import CorruptRecordError, NoRecordError, NotDispatchedError, StoredMessage
from mqstore.storage.format.delay_levels import PROPERTY_DELAY
from mqstore.storage.format.properties import (
    PROPERTY_TAGS,
    PROPERTY_UNIQUE_KEY,
    PROPERTY_WAIT_STORE_OK,
    decode_properties,
    encode_properties,
)

log = logging.getLogger("mqstore.remoting")

PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
OP_TAG = "d"
"""The op message's tag (`TransactionalMessageUtil.REMOVE_TAG`): tags code 100."""
TRANSACTION_BITS = 0xC
COMMIT_BITS = 0x8
HOST_FAMILY_BITS = 0x30
UNKNOWN, COMMIT, ROLLBACK = 0, 8, 12
"""`commitOrRollback` of 37 (`MessageSysFlag.TRANSACTION_NOT_TYPE` / `_COMMIT_TYPE` /
`_ROLLBACK_TYPE`)."""
END_POLL_INTERVAL_MS = 10
"""How often a 37 looks again for a half the indexer has not dispatched yet."""


def is_half(properties: dict[str, str], *, reconsume_times: int) -> bool:
    """RocketMQ's test: `TRAN_MSG` is true, and the send is not an old client's retry of a
    committed message (reconsume times and `DELAY` both above 0)."""
    if properties.get(PROPERTY_TRANSACTION_PREPARED, "").lower() != "true":
        return False
    delay = properties.get(PROPERTY_DELAY, "0")
    return not (reconsume_times > 0 and delay.lstrip("-").isdigit() and int(delay) > 0)


def half_of(forward: ForwardRequest) -> ForwardRequest:
    """A send with the half's bit: its half (a routed put to the half topic), or, for a
    retry of a committed message, the send with its transaction bits cleared (stored with
    0x4 it would have no queue entry and never be delivered)."""
    properties = decode_properties(forward.properties)
    if not is_half(properties, reconsume_times=forward.reconsume_times):
        return forward._replace(sysflag=forward.sysflag & ~TRANSACTION_BITS)
    unique_key = properties.get(PROPERTY_UNIQUE_KEY)
    if unique_key:
        properties[PROPERTY_TRANSACTION_ID] = unique_key
    properties[PROPERTY_REAL_TOPIC] = forward.topic
    properties[PROPERTY_REAL_QUEUE_ID] = str(forward.queue_id)
    return forward._replace(kind=KIND_ROUTED, topic=TRANSACTION_HALF_TOPIC, queue_id=0,
                            sysflag=forward.sysflag & ~TRANSACTION_BITS,
                            properties=encode_properties(properties))


def half_answer_fields(forward: ForwardRequest) -> dict[str, str]:
    """What a half send's answer says besides the half's msg id and offset: the queue the
    producer asked for and the transaction id (`SendMessageResponseHeader`)."""
    properties = decode_properties(forward.properties)
    fields = {"queueId": properties.get(PROPERTY_REAL_QUEUE_ID, "0")}
    transaction_id = properties.get(PROPERTY_TRANSACTION_ID)
    if transaction_id:
        fields["transactionId"] = transaction_id
    return fields


async def end_transaction(front: Front, request: Command, peer: Peer) -> Command | None:
    """END_TRANSACTION (37): commit or roll back the half the header names; counted by
    outcome (transaction_counts.py), an error as `refused`."""
    from_check = headers.flag(request, "fromTransactionCheck")
    try:
        outcome, answer = await _end(front, request, peer, from_check=from_check)
    except Exception:
        front.transaction_counts.end("refused", from_check=from_check)
        raise
    front.transaction_counts.end(outcome, from_check=from_check)
    return answer


async def _end(front: Front, request: Command, peer: Peer, *,
               from_check: bool) -> tuple[str, Command | None]:
    """The outcome of a 37 and its answer."""
    state = headers.number(request, "commitOrRollback", minimum=headers.INT32_MIN,
                           maximum=headers.INT32_MAX)
    if state not in (COMMIT, ROLLBACK):
        log.info("END_TRANSACTION from %s with state %d: nothing to do", peer.address, state)
        return ("unknown" if state == UNKNOWN else "refused"), None
    half = await _named_half(front, request)
    if state == COMMIT:
        await commit(front, half, from_check=from_check)
    await forward_routed(front, op_of(half.queue_offset))
    return ("commit" if state == COMMIT else "rollback"), request.answer(SUCCESS)


async def _named_half(front: Front, request: Command) -> StoredMessage:
    """The half a 37 names, checked as `EndTransactionProcessor` checks it."""
    position = headers.number(request, "commitLogOffset", minimum=0)
    half_offset = headers.number(request, "tranStateTableOffset", minimum=0)
    group = headers.text(request, "producerGroup")
    half = await half_at(front, position)
    if half.topic != TRANSACTION_HALF_TOPIC:
        raise RemotingError(SYSTEM_ERROR, f"Find prepared transaction message failed: "
                                          f"position {position} holds a {half.topic} message")
    immunity = half.properties.get(PROPERTY_CHECK_IMMUNITY_SECONDS)
    if immunity is not None and immunity.isdigit() and \
            not headers.flag(request, "fromTransactionCheck"):
        age_ms = int(time.time() * 1000) - half.born_timestamp_ms
        if age_ms > max(int(immunity) * 1000, front.settings.transaction_timeout_ms):
            raise RemotingError(ILLEGAL_OPERATION, f"the half at {position} is {age_ms} ms "
                                                   f"old, past its check immunity")
    if half.properties.get(PROPERTY_PRODUCER_GROUP) != group:
        raise RemotingError(SYSTEM_ERROR, "The producer group wrong")
    if half.queue_offset != half_offset:
        raise RemotingError(SYSTEM_ERROR, "The transaction state table offset wrong")
    return half


async def half_at(front: Front, position: int) -> StoredMessage:
    """The message at `position`, waiting up to `transaction_end_wait_ms` for the indexer
    to dispatch it (a producer's 37 can arrive before)."""
    deadline = time.monotonic() + front.settings.transaction_end_wait_ms / 1000
    while True:
        try:
            return front.view.message_at(position)
        except NotDispatchedError as error:
            if time.monotonic() >= deadline:
                raise RemotingError(SYSTEM_ERROR, f"Find prepared transaction message "
                                                  f"failed: {error}") from None
        except (NoRecordError, CorruptRecordError) as error:
            raise RemotingError(SYSTEM_ERROR, f"Find prepared transaction message failed: "
                                              f"{error}") from None
        await asyncio.sleep(END_POLL_INTERVAL_MS / 1000)


async def commit(front: Front, half: StoredMessage, *, from_check: bool) -> None:
    """Put the real message of `half` (`endMessageTransaction`), unless a check's answer
    finds it committed already (a commit whose op a crash lost: module docstring)."""
    if from_check and committed_already(front, half):
        log.info("transaction %s is committed already: only its op is written",
                 half.properties.get(PROPERTY_TRANSACTION_ID))
        return
    await forward_routed(front, commit_of(half))


def committed_already(front: Front, half: StoredMessage) -> bool:
    """Whether the real topic holds a commit of `half`'s transaction (found through the
    message index by UNIQ_KEY; False when the index has none, or is disabled: the commit
    is then written again, as the module docstring says, rather than refused forever)."""
    transaction_id = half.properties.get(PROPERTY_TRANSACTION_ID)
    topic = half.properties.get(PROPERTY_REAL_TOPIC)
    if not transaction_id or not topic or front.view.index is None:
        return False
    found = front.view.query_by_key(topic, transaction_id)
    return any(message.sysflag & TRANSACTION_BITS == COMMIT_BITS and
               message.properties.get(PROPERTY_TRANSACTION_ID) == transaction_id
               for message in found)


def commit_of(half: StoredMessage) -> ForwardRequest:
    """The real message of a half: its topic and queue back, transaction bits 0x8."""
    properties = dict(half.properties)
    topic = properties.pop(PROPERTY_REAL_TOPIC, None)
    queue_id = properties.pop(PROPERTY_REAL_QUEUE_ID, None)
    if topic is None or queue_id is None or not queue_id.isdigit():
        raise RemotingError(SYSTEM_ERROR, f"the half at {half.physical_offset} names no "
                                          f"{PROPERTY_REAL_TOPIC}/{PROPERTY_REAL_QUEUE_ID}")
    sysflag = (half.sysflag & ~(TRANSACTION_BITS | HOST_FAMILY_BITS)) | COMMIT_BITS
    return ForwardRequest(0, KIND_ROUTED, int(queue_id), sysflag, half.flag,
                          half.born_timestamp_ms, half.reconsume_times, half.born_host, topic,
                          encode_properties(properties), bytes(half.body))


def op_of(*half_offsets: int) -> ForwardRequest:
    """The op message that ends the halves at `half_offsets` of half queue 0."""
    properties = {PROPERTY_TAGS: OP_TAG, PROPERTY_WAIT_STORE_OK: "true"}
    body = "".join(f"{offset}," for offset in half_offsets).encode("ascii")
    return ForwardRequest(0, KIND_ROUTED, 0, 0, 0, int(time.time() * 1000), 0, "",
                          TRANSACTION_OP_TOPIC, encode_properties(properties), body)


async def forward_routed(front: Front, forward: ForwardRequest) -> ForwardAnswer:
    """Forward a put the front routed; RemotingError unless the writer stored it."""
    answer = await front.link.send(forward)
    if not answer.results:
        raise RemotingError(SYSTEM_ERROR, f"{forward.topic}: {answer.status}: {answer.reason}")
    return answer
