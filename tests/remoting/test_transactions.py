"""Transactional messages, handler by handler and pass by pass, over a real store: the half
send, END_TRANSACTION (37), the check service's CHECK_TRANSACTION_STATE (39), and the crash
points between their puts (services/notifier/remoting/transactions.py and
services/notifier/remoting/transaction_check.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.services.common.links.forward_wire import ForwardAnswer, ForwardRequest
from mqstore.services.common.topics.rules import (
    TRANSACTION_CHECK_MAX_TOPIC,
    TRANSACTION_HALF_TOPIC,
    TRANSACTION_OP_TOPIC,
    system_topic_refusal,
)
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.client_table import ClientEntry
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.services.notifier.remoting.transaction_check import TransactionCheck
from mqstore.services.notifier.remoting.transactions import end_transaction
from mqstore.storage import Message, MessageStore, StoredMessage
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.format.message import decode_stored
from mqstore.storage.format.properties import encode_properties
from tests.remoting.fronts import front_over
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

PRODUCER = Peer("10.0.0.9:50000", 3)
GROUP = "payments"
TOPIC = "Orders"


class Crash(ConnectionError):
    """The notifier died before the writer took this put."""


class StoreLink:
    """The writer link over a real store: puts, waits for the indexer, refreshes the view.
    `crash_on`: the topic whose next put is lost (the process died first)."""

    def __init__(self, writer: MessageStore, indexer: Indexer) -> None:
        self.writer, self.indexer = writer, indexer
        self.front: Front | None = None
        self.crash_on: str | None = None

    async def send(self, forward: ForwardRequest) -> ForwardAnswer:
        if forward.topic == self.crash_on:
            self.crash_on = None
            raise Crash(f"died before putting to {forward.topic}")
        result = self.writer.put(Message(
            forward.topic, forward.queue_id, forward.body, flag=forward.flag,
            born_host=forward.born_host or None, born_timestamp_ms=forward.born_timestamp_ms,
            sysflag=forward.sysflag, reconsume_times=forward.reconsume_times,
            properties_encoded=forward.properties or None))
        assert result.ok, result
        wait_dispatched(self.indexer, self.writer.committed_position)
        assert self.front is not None
        view, deadline = self.front.view, time.monotonic() + 20
        while view.refresh() is not None and \
                view.max_offset(forward.topic, forward.queue_id) <= result.queue_offset:
            assert time.monotonic() < deadline, f"{forward.topic} not readable"
            time.sleep(0.005)  # the indexer writes its queues' watermark every 20 ms
        return ForwardAnswer(forward.request_id, "PUT_OK", [(
            result.queue_offset, result.physical_offset, result.store_timestamp_ms)], "")


@dataclasses.dataclass
class Rig:
    directory: Path
    link: StoreLink
    pushed: list[tuple[int, Command]] = dataclasses.field(default_factory=list)

    @contextlib.contextmanager
    def front(self, **settings: int) -> Iterator[Front]:
        """A front over the store (a fresh one: what a restarted notifier sees), with a
        producer of GROUP on connection 3 and every push recorded."""
        config = indexer_config(store_host="127.0.0.1:9876")
        offsets = ConsumerOffsets(self.directory, lock_timeout_ms=1000)
        with front_over(self.directory, offsets=offsets, config=config) as front:
            front.link = self.link  # type: ignore[assignment]
            self.link.front = front
            front.settings = dataclasses.replace(front.settings, transaction_timeout_ms=1000,
                                                 transaction_end_wait_ms=200, **settings)
            front.push = lambda connection, command: bool(self.pushed.append(
                (connection, command))) or True
            front.clients.heartbeat(ClientEntry("10.0.0.9@1", PRODUCER.connection_id,
                                                PRODUCER.address, "JAVA", 453, 0,
                                                producer_groups={GROUP}),
                                    per_connection_max=16)
            front.view.refresh()
            yield front


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with MessageStore.open(tmp_path, writer_config()) as writer, \
            Indexer.open(tmp_path, indexer_config()) as indexer:
        yield Rig(tmp_path, StoreLink(writer, indexer))


def ask(front: Front, request: Command) -> Command | None:
    return asyncio.run(answer_to(front, request, PRODUCER))


def half_send(front: Front, key: str, *, born_ms: int | None = None,
              **extra: str) -> Command:
    properties = {"TRAN_MSG": "true", "PGROUP": GROUP, "UNIQ_KEY": key, "WAIT": "true",
                  **extra}
    answer = ask(front, Command(codes.SEND_MESSAGE_V2, 1, 0, {
        "a": GROUP, "b": TOPIC, "c": "TBW102", "d": "4", "e": "2", "f": "4",
        "g": str(born_ms if born_ms is not None else int(time.time() * 1000)), "h": "0",
        "i": encode_properties(properties).decode()}, key.encode()))
    assert answer is not None and answer.code == codes.SUCCESS, answer
    return answer


def end(front: Front, state: int, *, half_offset: int, position: int,
        from_check: bool = False, group: str = GROUP) -> Command | None:
    return ask(front, Command(codes.END_TRANSACTION, 2, codes.FLAG_ONEWAY, {
        "producerGroup": group, "tranStateTableOffset": str(half_offset),
        "commitLogOffset": str(position), "commitOrRollback": str(state),
        "fromTransactionCheck": str(from_check).lower(), "msgId": "m"}))


def ended(front: Front, answer: Command, state: int, **kwargs: bool) -> None:
    position = int(answer.ext_fields["msgId"][16:], 16)
    end(front, state, half_offset=int(answer.ext_fields["queueOffset"]), position=position,
        **kwargs)


def stored(front: Front, topic: str, queue_id: int = 0) -> list[StoredMessage]:
    with front.view.get(topic, queue_id, 0, 100) as got:
        for message in got.messages:
            message.body = bytes(message.body)
        return list(got.messages)


def delivered(front: Front) -> list[bytes]:
    return [bytes(message.body) for queue_id in range(4)
            for message in stored(front, TOPIC, queue_id)]


def check_pass(front: Front) -> None:
    asyncio.run(TransactionCheck(front).check_pass())


def answer_checks(rig: Rig, front: Front, state: int) -> int:
    """Answer every recorded check as a producer would (37 naming the re-put half)."""
    answered = 0
    for connection, command in rig.pushed:
        assert connection == PRODUCER.connection_id
        assert command.code == codes.CHECK_TRANSACTION_STATE and command.oneway
        end(front, state, half_offset=int(command.ext_fields["tranStateTableOffset"]),
            position=int(command.ext_fields["commitLogOffset"]), from_check=True)
        answered += 1
    rig.pushed.clear()
    return answered


def test_a_half_waits_in_the_half_queue_in_rocketmqs_layout(rig: Rig) -> None:
    with rig.front() as front:
        answer = half_send(front, "K1")
        assert (answer.ext_fields["queueId"], answer.ext_fields["queueOffset"],
                answer.ext_fields["transactionId"]) == ("2", "0", "K1")
        (half,) = stored(front, TRANSACTION_HALF_TOPIC)
        assert int(answer.ext_fields["msgId"][16:], 16) == half.physical_offset
        assert half.sysflag & 0xC == 0 and half.queue_id == 0
        assert (half.properties["REAL_TOPIC"], half.properties["REAL_QID"],
                half.properties["__transactionId__"]) == (TOPIC, "2", "K1")
        assert delivered(front) == []


def test_commit_delivers_the_real_message_and_rollback_nothing(rig: Rig) -> None:
    with rig.front() as front:
        ended(front, half_send(front, "C"), 8)
        ended(front, half_send(front, "R"), 12)
        assert delivered(front) == [b"C"]
        (real,) = stored(front, TOPIC, 2)
        assert real.sysflag & 0xC == 0x8 and real.properties["TRAN_MSG"] == "true"
        assert "REAL_TOPIC" not in real.properties and real.properties["PGROUP"] == GROUP
        ops = stored(front, TRANSACTION_OP_TOPIC)
        assert [(op.body, op.tags) for op in ops] == [(b"0,", "d"), (b"1,", "d")]
        check_pass(front)
        assert rig.pushed == []


@pytest.mark.parametrize("wrong", ["group", "offset", "position"])
def test_an_end_that_does_not_match_its_half_changes_nothing(rig: Rig, wrong: str) -> None:
    with rig.front() as front:
        answer = half_send(front, "W")
        position = int(answer.ext_fields["msgId"][16:], 16)
        refused = end(front, 8, half_offset=1 if wrong == "offset" else 0,
                      position=position + 1 if wrong == "position" else position,
                      group="other" if wrong == "group" else GROUP)
        assert refused is not None and refused.code == codes.SYSTEM_ERROR
        assert delivered(front) == [] and stored(front, TRANSACTION_OP_TOPIC) == []


def test_an_unknown_transaction_is_checked_then_committed_once(rig: Rig) -> None:
    with rig.front() as front:
        old_ms = int(time.time() * 1000) - 5000
        half_send(front, "U", born_ms=old_ms)
        half_send(front, "young")  # younger than the timeout: the walk stops before it
        check_pass(front)
        ((_, check),) = rig.pushed
        assert check.ext_fields["tranStateTableOffset"] == "2"
        assert check.ext_fields["topic"] == TRANSACTION_HALF_TOPIC
        body = decode_stored(check.body, 0)
        assert (body.topic, body.queue_id, body.queue_offset, body.body) == (TOPIC, 2, 2, b"U")
        assert body.physical_offset == int(check.ext_fields["commitLogOffset"])
        assert body.properties["TRANSACTION_CHECK_TIMES"] == "1"
        assert answer_checks(rig, front, 8) == 1
        check_pass(front)
        assert rig.pushed == []
        assert delivered(front) == [b"U"]
        assert front.offsets.query("CID_RMQ_SYS_TRANS", TRANSACTION_HALF_TOPIC, 0) == 1


def test_a_half_checked_too_often_goes_to_the_check_max_topic(rig: Rig) -> None:
    with rig.front(transaction_check_max=2) as front:
        half_send(front, "N", born_ms=int(time.time() * 1000) - 5000)
        for _ in range(3):
            check_pass(front)
            time.sleep(0.002)  # the next pass begins after the re-put was stored
        assert len(rig.pushed) == 2  # then never again
        (kept,) = stored(front, TRANSACTION_CHECK_MAX_TOPIC)
        assert kept.properties["TRANSACTION_CHECK_TIMES"] == "2"
        assert delivered(front) == []


@pytest.mark.parametrize(("state", "expected"), [(8, [b"X"]), (12, [])])
def test_a_crash_between_an_end_and_its_op_delivers_a_commit_once_a_rollback_never(
        rig: Rig, state: int, expected: list[bytes]) -> None:
    with rig.front() as front:
        answer = half_send(front, "X", born_ms=int(time.time() * 1000) - 5000)
        rig.link.crash_on = TRANSACTION_OP_TOPIC
        with pytest.raises(Crash):
            _end_raw(front, answer, state)
    with rig.front() as restarted:
        assert delivered(restarted) == expected
        check_pass(restarted)
        assert answer_checks(rig, restarted, state) == 1  # the producer answers again
        assert delivered(restarted) == expected
        assert [op.body for op in stored(restarted, TRANSACTION_OP_TOPIC)] == [b"1,"]
        check_pass(restarted)
        assert rig.pushed == []


def test_a_crash_before_the_progress_is_written_checks_twice_and_delivers_once(
        rig: Rig) -> None:
    with rig.front() as front:
        half_send(front, "Z", born_ms=int(time.time() * 1000) - 5000)
        check_pass(front)  # re-put at 1; the progress (1) is never written: a crash
    time.sleep(0.002)
    with rig.front() as restarted:
        check_pass(restarted)  # half 0 again (re-put at 2), then half 1
        assert answer_checks(rig, restarted, 8) == 3
        assert delivered(restarted) == [b"Z"]
        time.sleep(0.002)
        check_pass(restarted)
        assert rig.pushed == []


def test_a_crash_before_the_half_is_stored_leaves_nothing(rig: Rig) -> None:
    with rig.front() as front:
        rig.link.crash_on = TRANSACTION_HALF_TOPIC
        failed = ask(front, Command(codes.SEND_MESSAGE_V2, 1, 0, {
            "a": GROUP, "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "4",
            "g": "0", "h": "0", "i": "TRAN_MSG\x01true\x02PGROUP\x01payments\x02"}, b"x"))
        assert failed is not None and failed.code == codes.SYSTEM_ERROR  # the client retries
        check_pass(front)
        assert delivered(front) == [] and rig.pushed == []


def _end_raw(front: Front, answer: Command, state: int) -> None:
    """37 run by its handler, not `answer_to`: a crash propagates as the process death."""
    position = int(answer.ext_fields["msgId"][16:], 16)
    asyncio.run(end_transaction(front, Command(codes.END_TRANSACTION, 2, codes.FLAG_ONEWAY, {
        "producerGroup": GROUP, "tranStateTableOffset": answer.ext_fields["queueOffset"],
        "commitLogOffset": str(position), "commitOrRollback": str(state)}), PRODUCER))


def test_only_routed_puts_write_the_transaction_topics() -> None:
    for topic in (TRANSACTION_HALF_TOPIC, TRANSACTION_OP_TOPIC, TRANSACTION_CHECK_MAX_TOPIC):
        assert system_topic_refusal(topic, send_back=False) is not None
        assert system_topic_refusal(topic, send_back=True, routed=True) is None
    assert system_topic_refusal("RMQ_SYS_OTHER", send_back=True, routed=True) is not None
