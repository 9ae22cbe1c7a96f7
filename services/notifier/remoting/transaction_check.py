"""`TransactionCheck`: asks producers about the halves no END_TRANSACTION ended.

Every `remoting.transaction_check_interval_ms` (RocketMQ's `transactionCheckInterval`) a
pass walks half queue `RMQ_SYS_TRANS_HALF_TOPIC`/0 as RocketMQ 5.5.0's
`TransactionalMessageServiceImpl#check` does:

1. Progress is the consumer offsets of group `CID_RMQ_SYS_TRANS` on the half and the op
   topic, as RocketMQ keeps them, here in the group's file under
   `config/consumer-offsets/` through the front's offset table (written every
   `offsets_flush_interval_ms`); a queue without one starts at its first offset.
2. Op messages from the op offset (at most `transaction_ops_per_pass_max`) name the halves
   already ended.
3. From the half offset (at most `transaction_halves_per_pass_max` halves), each half:

| the half                                          | the pass                                |
|---------------------------------------------------|-----------------------------------------|
| named by an op                                    | moves past it                           |
| the ops were not all read (the bound above)       | stops: its op may be among the rest     |
| stored after the pass began (a re-put of this one)| stops                                   |
| checked `transaction_check_max` times already     | copies it to `TRANS_CHECK_MAX_TIME_TOPIC`|
|                                                   | queue 0, moves past it: never checked   |
| younger than `transaction_timeout_ms` (or its     | stops: the producer's own 37 may come   |
| `CHECK_IMMUNITY_TIME_IN_SECONDS`), by born time   |                                         |
| otherwise                                         | re-puts it at the end of the half queue |
|                                                   | with `TRANSACTION_CHECK_TIMES` + 1 and  |
|                                                   | sends CHECK_TRANSACTION_STATE (39,      |
|                                                   | oneway) for the re-put to a live        |
|                                                   | producer of its `PGROUP`; moves past it |

4. The half offset is committed where the walk stopped, the op offset past the ops that
   name only halves below it; what the pass leaves waiting is kept for the metrics and
   `GET /v1/transactions`, and each half taken up is counted as `asked`, `unasked` or
   `discarded` (transaction_counts.py).

The producer answers 39 with END_TRANSACTION naming the re-put (transactions.py).  A group
with no live producer is not asked, but its half counts the check (RocketMQ's too), so a
producer gone for good ends in `TRANS_CHECK_MAX_TIME_TOPIC` after the max.  The producer's
connection: RocketMQ's `ProducerManager#getAvailableChannel`, a round robin over the
group's connections, trying up to three more if one is gone.

Crashes.  The re-put comes before the progress, so a crash between them re-puts the half
again on restart: two halves of one transaction, both checked.  Nothing is lost (the old
half is checked again), and nothing is doubled: a check's commit looks for a commit of the
same transaction first (transactions.py).  A crash after a copy to
`TRANS_CHECK_MAX_TIME_TOPIC` and before the progress copies it twice there, where nothing
is delivered.  Immunity halves are not re-put as RocketMQ re-puts them
(`TRAN_PREPARED_QUEUE_OFFSET`): the walk waits for them, as for any young half.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import time

from mqstore.services.common.links.forward_wire import KIND_ROUTED, ForwardRequest
from mqstore.services.common.topics.rules import (
    TRANSACTION_CHECK_MAX_TOPIC,
    TRANSACTION_HALF_TOPIC,
    TRANSACTION_OP_TOPIC,
)
from mqstore.services.notifier.remoting import transactions
from mqstore.services.notifier.remoting.codes import (
    CHECK_TRANSACTION_STATE,
    FLAG_ONEWAY,
    RemotingError,
)
from mqstore.services.notifier.remoting.context import Front
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.offset_table import OffsetCommitError
from mqstore.services.notifier.remoting.transaction_counts import CheckPass
from mqstore.storage import StoredMessage
from mqstore.storage.format import record
from mqstore.storage.format.hosts import parse_host
from mqstore.storage.format.message import offset_msg_id
from mqstore.storage.format.properties import PROPERTY_UNIQUE_KEY, encode_properties

log = logging.getLogger("mqstore.remoting")

CHECK_GROUP = "CID_RMQ_SYS_TRANS"
"""RocketMQ's `TransactionalMessageUtil.buildConsumerGroup()`: the group whose offsets on
the half and op topics are the check service's progress."""
READ_BATCH_MAX = 32
"""Halves or ops read per store read (RocketMQ reads op messages 32 at a time)."""
NEIGHBOURS_TRIED = 3
"""Connections tried after the chosen one when it is gone (`getAvailableChannel`)."""


@dataclasses.dataclass
class PassReport:
    """What one pass did (tests and the log read it)."""

    checked: int = 0
    discarded: int = 0
    unasked: int = 0
    """Halves re-put and counted, with no live producer of their group to ask."""
    half_offset: int = 0
    op_offset: int = 0


@dataclasses.dataclass
class OpsRead:
    half_offsets: dict[int, list[int]]
    """Op queue offset → the half offsets it ends, in op order."""
    next_offset: int
    complete: bool
    """Every op message the store holds was read."""

    def ended(self) -> set[int]:
        return {offset for offsets in self.half_offsets.values() for offset in offsets}

    def op_offset_after(self, half_offset: int, *, first: int) -> int:
        """Past the ops that end only halves below `half_offset`: no later pass needs them."""
        offset = first
        for op_offset, offsets in self.half_offsets.items():
            if any(half >= half_offset for half in offsets):
                return op_offset
            offset = op_offset + 1
        return offset


class TransactionCheck:
    def __init__(self, front: Front) -> None:
        self.front = front
        self._task: asyncio.Task[None] | None = None
        self._turn = itertools.count()
        """Round robin over a group's producer connections."""

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="remoting-transaction-check")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.front.settings.transaction_check_interval_ms / 1000)
            try:
                report = await self.check_pass()
            except (RemotingError, ConnectionError, TimeoutError, OffsetCommitError) as error:
                log.warning("transaction check pass stopped: %s", error)
                continue
            if report.checked or report.discarded:
                log.info("transaction check pass", extra=dataclasses.asdict(report))

    async def check_pass(self) -> PassReport:
        """One pass over the half queue (module docstring)."""
        view = self.front.view
        if TRANSACTION_HALF_TOPIC not in view.topics():
            self.front.transaction_counts.last_pass = CheckPass(
                int(time.time() * 1000), 0, 0, 0, 0, ops_complete=True, waiting=0)
            return PassReport()
        begun_ms = int(time.time() * 1000)
        half_offset = self._progress(TRANSACTION_HALF_TOPIC)
        op_offset = self._progress(TRANSACTION_OP_TOPIC)
        ops = self._read_ops(op_offset)
        report = PassReport()
        try:
            half_offset = await self._walk(half_offset, ops, begun_ms=begun_ms, report=report)
        finally:
            report.half_offset = half_offset
            report.op_offset = ops.op_offset_after(half_offset, first=op_offset)
            offsets = self.front.offsets
            offsets.commit(CHECK_GROUP, TRANSACTION_HALF_TOPIC, 0, report.half_offset)
            offsets.commit(CHECK_GROUP, TRANSACTION_OP_TOPIC, 0, report.op_offset)
            self.front.transaction_counts.last_pass = self._pass_end(report, ops)
        return report

    def _pass_end(self, report: PassReport, ops: OpsRead) -> CheckPass:
        """What the pass leaves waiting: the halves from its progress to the half queue's
        end that no op it read names (transaction_counts.py)."""
        view = self.front.view
        half_max_offset = view.max_offset(TRANSACTION_HALF_TOPIC, 0)
        ended = sum(report.half_offset <= offset < half_max_offset for offset in ops.ended())
        return CheckPass(int(time.time() * 1000), report.half_offset, half_max_offset,
                         report.op_offset, view.max_offset(TRANSACTION_OP_TOPIC, 0),
                         ops_complete=ops.complete,
                         waiting=max(0, half_max_offset - report.half_offset - ended))

    def _progress(self, topic: str) -> int:
        committed = self.front.offsets.query(CHECK_GROUP, topic, 0)
        first = self.front.view.min_offset(topic, 0)
        return first if committed is None else max(committed, first)

    def _read_ops(self, op_offset: int) -> OpsRead:
        view = self.front.view
        end = view.max_offset(TRANSACTION_OP_TOPIC, 0)
        last = min(end, op_offset + self.front.settings.transaction_ops_per_pass_max)
        ended: dict[int, list[int]] = {}
        offset = op_offset
        while offset < last:
            with view.get(TRANSACTION_OP_TOPIC, 0, offset,
                          min(READ_BATCH_MAX, last - offset)) as got:
                for message in got.messages:
                    ended[message.queue_offset] = _half_offsets(bytes(message.body))
                if got.next_offset <= offset:
                    break
                offset = got.next_offset
        return OpsRead(ended, offset, complete=offset >= end)

    async def _walk(self, half_offset: int, ops: OpsRead, *, begun_ms: int,
                    report: PassReport) -> int:
        """Check the halves from `half_offset`; the offset where the walk stopped."""
        ended = ops.ended()
        end = min(self.front.view.max_offset(TRANSACTION_HALF_TOPIC, 0),
                  half_offset + self.front.settings.transaction_halves_per_pass_max)
        while half_offset < end:
            if half_offset in ended:
                half_offset += 1
                continue
            if not ops.complete:
                break
            half = self._half(half_offset)
            if half is None or half.store_timestamp_ms > begun_ms:
                break
            if not await self._checked(half, begun_ms=begun_ms, report=report):
                break
            half_offset += 1
        return half_offset

    def _half(self, half_offset: int) -> StoredMessage | None:
        with self.front.view.get(TRANSACTION_HALF_TOPIC, 0, half_offset, 1) as got:
            if not got.messages or got.messages[0].queue_offset != half_offset:
                return None
            half = got.messages[0]
            half.body = bytes(half.body)
            return half

    async def _checked(self, half: StoredMessage, *, begun_ms: int,
                       report: PassReport) -> bool:
        """Discard or check `half`; False: it is too young, the walk stops before it."""
        settings = self.front.settings
        properties = half.properties
        check_times = _integer(properties.get(transactions.PROPERTY_CHECK_TIMES), 0)
        if check_times >= settings.transaction_check_max:
            await transactions.forward_routed(self.front, _discarded(half))
            report.discarded += 1
            self.front.transaction_counts.check("discarded")
            return True
        immunity_seconds = properties.get(transactions.PROPERTY_CHECK_IMMUNITY_SECONDS)
        immunity_ms = settings.transaction_timeout_ms if immunity_seconds is None else \
            _integer(immunity_seconds, settings.transaction_timeout_ms // 1000) * 1000
        age_ms = begun_ms - half.born_timestamp_ms
        if 0 <= age_ms <= immunity_ms:
            return False
        again = dict(properties)
        again[transactions.PROPERTY_CHECK_TIMES] = str(check_times + 1)
        answer = await transactions.forward_routed(self.front, _reput(half, again))
        queue_offset, position, stored_ms = answer.results[0]
        asked = self._ask(half, again, queue_offset=queue_offset, position=position,
                          stored_ms=stored_ms)
        report.checked += 1
        report.unasked += not asked
        self.front.transaction_counts.check("asked" if asked else "unasked")
        return True

    def _ask(self, half: StoredMessage, properties: dict[str, str], *, queue_offset: int,
             position: int, stored_ms: int) -> bool:
        """CHECK_TRANSACTION_STATE for the re-put half to a live producer of its group."""
        front = self.front
        group = properties.get(transactions.PROPERTY_PRODUCER_GROUP, "")
        connections = front.clients.producer_connections(group)
        if not connections:
            log.info("no live producer of group %s to check half %d", group, queue_offset)
            return False
        unique_key = properties.get(PROPERTY_UNIQUE_KEY, "")
        fields = {"tranStateTableOffset": str(queue_offset), "commitLogOffset": str(position),
                  "msgId": unique_key,
                  "transactionId": properties.get(transactions.PROPERTY_TRANSACTION_ID,
                                                  unique_key),
                  "offsetMsgId": offset_msg_id(front.store_host_packed, position),
                  "topic": TRANSACTION_HALF_TOPIC, "bname": front.settings.broker_name}
        command = Command(CHECK_TRANSACTION_STATE, next(front.opaques), FLAG_ONEWAY, fields,
                          check_body(half, properties, store_host=front.store_host,
                                     queue_offset=queue_offset, position=position,
                                     stored_ms=stored_ms))
        first = next(self._turn)
        for tried in range(min(len(connections), 1 + NEIGHBOURS_TRIED)):
            if front.push(connections[(first + tried) % len(connections)], command):
                return True
        return False


def check_body(half: StoredMessage, properties: dict[str, str], *, store_host: str,
               queue_offset: int, position: int, stored_ms: int) -> bytes:
    """The checked message as a commit log record (`MessageDecoder#encode`): the re-put
    half's offsets and properties, its real topic and queue (the producer's
    `checkLocalTransaction` reads them)."""
    layout = record.layout_for(sysflag=half.sysflag, magic=half.magic)
    encoded = bytearray(record.encode_record(
        layout=layout, queue_id=_integer(properties.get(transactions.PROPERTY_REAL_QUEUE_ID),
                                         0),
        flag=half.flag, sysflag=half.sysflag & ~transactions.HOST_FAMILY_BITS,
        born_timestamp_ms=half.born_timestamp_ms,
        born_host=parse_host(half.born_host, setting="born_host"),
        store_host=parse_host(store_host, setting="store_host"), body=bytes(half.body),
        topic=properties.get(transactions.PROPERTY_REAL_TOPIC, half.topic).encode("utf-8"),
        properties=encode_properties(properties)))
    record.stamp_record(encoded, 0, store_timestamp_offset=layout.store_timestamp_offset,
                        queue_offset=queue_offset, physical_offset=position,
                        store_timestamp_ms=stored_ms)
    return bytes(encoded)


def _reput(half: StoredMessage, properties: dict[str, str]) -> ForwardRequest:
    """The half again, at the end of the half queue, with its new check count."""
    return ForwardRequest(0, KIND_ROUTED, 0,
                          half.sysflag & ~transactions.HOST_FAMILY_BITS, half.flag,
                          half.born_timestamp_ms, half.reconsume_times, half.born_host,
                          TRANSACTION_HALF_TOPIC, encode_properties(properties),
                          bytes(half.body))


def _discarded(half: StoredMessage) -> ForwardRequest:
    """The half checked too often, kept in `TRANS_CHECK_MAX_TIME_TOPIC` queue 0."""
    return _reput(half, dict(half.properties))._replace(topic=TRANSACTION_CHECK_MAX_TOPIC)


def _half_offsets(body: bytes) -> list[int]:
    """The half offsets an op body names (`"0,1,"`); what is not a number is skipped."""
    text = body.decode("ascii", "replace")
    return [int(piece) for piece in text.split(",") if piece.strip().isdigit()]


def _integer(text: str | None, default: int) -> int:
    if text is None:
        return default
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else default
