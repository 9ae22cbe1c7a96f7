"""kill -9 of the notifier at each crash point of a transaction, then a restart and the check:
the "Crashes" table of services/notifier/remoting/transactions.py, with real processes.

The writer, the indexer and the notifier (with its RocketMQ remoting front) run as their own
processes (tests/services/transaction_services.py); the front's writer link goes through a
relay in the test (tests/services/forward_gate.py) that passes every frame and can hold back
the op messages.  A producer speaks raw remoting frames: it sends halves (SEND_MESSAGE_V2 with
`TRAN_MSG`, born a minute ago) and END_TRANSACTION (37), and decides each transaction once,
commit or rollback.  The notifier, which holds every step (it forwards the real message and
the op, one after the other, to the writer), is killed with SIGKILL at:

| crash point            | how it is reached, deterministically                              |
|------------------------|-------------------------------------------------------------------|
| half, before 37        | both halves' answers came back (the writer stored them); no 37 is |
|                        | sent: one is to commit, the other to roll back                    |
| rollback, before op    | 37 rollback sent; the gate holds the op message, the only put of  |
|                        | a rollback, so the notifier waits on it when killed               |
| commit, before op      | 37 commit sent; the gate relayed the real message and its answer  |
|                        | (stored in `Orders`), then holds the op the notifier sent next    |
| after the op           | 37 commit and 37 rollback sent; the gate relayed both ops' answers |

The first notifier runs no check pass before the kill (an hour apart), so only the test's
own requests move a half.  Held ops are dropped after the kill: they never reach the writer.
The restarted notifier checks every 300 ms the halves older than 1 s; the producer connects
(HEART_BEAT with its group) and answers every CHECK_TRANSACTION_STATE (39) with the decision
it made (a half that never saw a 37 is decided there), until every half it expects was asked
and four passes asked nothing more, which means no half is left without an op.  Then a
consumer pulls `Orders` from offset 0: every committed message exactly once, no rolled-back
one, and nothing asked about a transaction whose op was stored.  The gate also saw every
put of the run: none to `Orders` of a rolled-back message, and no held op.  After the op, a
third half with no 37 is the canary: it is behind the ended ones in the half queue, so its
check shows the walk went past them without asking.

The commit point runs again with `store.index_enabled` off: the check's commit cannot look
for the copy stored before the crash, so the message may be delivered twice (at least once,
as services/notifier/remoting/transactions.py says), but it is delivered and its half ended.
(Until `committed_already` skipped a disabled index, its lookup raised, every check's commit
failed, and the half was asked again at every pass until `transaction_check_max` moved it
away: the commit was lost.)
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from mqstore.services.common.topics.rules import TRANSACTION_HALF_TOPIC, TRANSACTION_OP_TOPIC
from tests.remoting.client import RemotingClient
from tests.services.forward_gate import ForwardGate
from tests.services.transaction_services import (
    CHECKING_ENV,
    COMMIT,
    ROLLBACK,
    TOPIC,
    TransactionServices,
    answer_checks,
    delivered,
    end,
    send_half,
)


@dataclasses.dataclass(frozen=True)
class CrashPoint:
    name: str
    decisions: dict[str, int]
    """Each transaction's key and the producer's decision, in send order."""
    ended: frozenset[str]
    """The transactions whose 37 the producer sends before the kill."""
    hold_ops: bool
    reached: Callable[[ForwardGate], bool]
    """What the gate saw when the notifier is killed."""
    asked: frozenset[str]
    """The transactions the restarted notifier must check."""
    index_enabled: bool = True
    copies_max: int = 1
    """Deliveries a committed message may have (more than one only without the index)."""

    def committed(self) -> set[str]:
        return {key for key, state in self.decisions.items() if state == COMMIT}


def _puts(gate: ForwardGate, topic: str) -> list[bytes]:
    return [body for put_topic, body in gate.passed if put_topic == topic]


POINTS = [
    CrashPoint("half-before-end", {"HALF-C": COMMIT, "HALF-R": ROLLBACK}, frozenset(),
               hold_ops=False,
               reached=lambda gate: len(_puts(gate, TRANSACTION_HALF_TOPIC)) == 2 and
               not _puts(gate, TOPIC),
               asked=frozenset({"HALF-C", "HALF-R"})),
    CrashPoint("rollback-before-op", {"RB": ROLLBACK}, frozenset({"RB"}), hold_ops=True,
               reached=lambda gate: len(gate.ops_held) == 1 and not _puts(gate, TOPIC),
               asked=frozenset({"RB"})),
    CrashPoint("commit-before-op", {"CM": COMMIT}, frozenset({"CM"}), hold_ops=True,
               reached=lambda gate: len(gate.ops_held) == 1 and
               _puts(gate, TOPIC) == [b"CM"],
               asked=frozenset({"CM"})),
    CrashPoint("after-op", {"AC": COMMIT, "AR": ROLLBACK, "CANARY": COMMIT},
               frozenset({"AC", "AR"}), hold_ops=False,
               reached=lambda gate: len(gate.ops_answered) == 2,
               asked=frozenset({"CANARY"})),
    CrashPoint("commit-before-op-without-index", {"CM": COMMIT}, frozenset({"CM"}),
               hold_ops=True,
               reached=lambda gate: len(gate.ops_held) == 1 and
               _puts(gate, TOPIC) == [b"CM"],
               asked=frozenset({"CM"}), index_enabled=False, copies_max=2),
]


async def _until_the_kill_point(services: TransactionServices, point: CrashPoint) -> None:
    """Halves, then the 37s of `point.ended`; returns once the gate saw the point."""
    services.gate.hold_ops = point.hold_ops
    client = await RemotingClient.connect(services.remoting)
    try:
        answers = {key: await send_half(client, key) for key in point.decisions}
        for key in point.ended:
            await end(client, answers[key].ext_fields, point.decisions[key], from_check=False)
        services.gate.wait_for(f"the {point.name} point", lambda gate: (
            len(gate.ops_held) + len(gate.ops_answered) == len(point.ended) and
            point.reached(gate)) or None)
    finally:
        await client.close()


@pytest.mark.parametrize("point", POINTS, ids=lambda point: point.name)
def test_a_notifier_killed_at_a_transaction_step_loses_no_commit_and_delivers_no_rollback(
        tmp_path: Path, point: CrashPoint) -> None:
    with TransactionServices(tmp_path, index_enabled=point.index_enabled) as services:
        asyncio.run(_until_the_kill_point(services, point))
        services.kill_notifier()
        held = list(services.gate.ops_held)
        services.gate.drop_held()
        services.start("notifier", CHECKING_ENV)
        asked = asyncio.run(answer_checks(services.remoting, point.decisions,
                                          set(point.asked)))
        got = asyncio.run(delivered(services.remoting))
        stored_ops = _puts(services.gate, TRANSACTION_OP_TOPIC)
        real_puts = _puts(services.gate, TOPIC)
    assert len(held) == (len(point.ended) if point.hold_ops else 0)
    assert set(asked) == point.asked, asked
    assert set(got) == point.committed(), got
    assert all(1 <= copies <= point.copies_max for copies in got.values()), got
    assert not set(held) & set(stored_ops), "a held op reached the writer"
    # Every put to the real topic, before the kill and after: never a rolled-back message.
    assert {body.decode() for body in real_puts} == point.committed(), real_puts
