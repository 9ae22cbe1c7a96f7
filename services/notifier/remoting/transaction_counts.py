"""`TransactionCounts`: what the front did with transactions since it started, and what the
check service found at its last pass.

transactions.py and transaction_check.py count, the notifier's metrics read the totals at
scrape time (services/notifier/metrics.py) and `GET /v1/transactions` the last pass
(services/notifier/transaction_status.py):

| count                               | when                                              |
|-------------------------------------|---------------------------------------------------|
| `ends[(outcome, from_check)]`       | an END_TRANSACTION (37) handled: `commit`,        |
|                                     | `rollback`, `unknown` (state 0: nothing done) or  |
|                                     | `refused` (an error, never seen by the producer:  |
|                                     | 37 is oneway; or a state other than 0, 8, 12);    |
|                                     | `from_check` "true" when it answers a check       |
| `checks["asked"]`                   | a half re-put and CHECK_TRANSACTION_STATE (39)    |
|                                     | sent to a live producer of its group              |
| `checks["unasked"]`                 | a half re-put and counted, no live producer to ask|
| `checks["discarded"]`               | a half checked `transaction_check_max` times,     |
|                                     | copied to `TRANS_CHECK_MAX_TIME_TOPIC`: never     |
|                                     | checked again                                     |

A check's answer is a 37 with `fromTransactionCheck=true`: its outcome is counted in
`ends`, so asked checks minus answered ones is what producers left unanswered (a lost
oneway, a producer gone, or one that answers nothing for an UNKNOW transaction).

`last_pass` (`CheckPass`) is what one pass saw when it ended: the check's progress on the
half and op queues, the half queue's end, and `waiting`, the halves from the progress to
that end no op the pass read names.  Every half with no op has its latest copy at or past
the progress (a checked half is re-put at the end), so `waiting` counts each open
transaction once (twice only after a crash between a re-put and its progress), including
the young ones the producer may still end itself.  It is as old as the last pass (every
`remoting.transaction_check_interval_ms`), and an upper bound when the pass did not read
every op (`ops_complete` false: more than `transaction_ops_per_pass_max` waited).

Plain integers on the event loop, no lock, as retry_counts.py.  The label values are fixed,
so every series is present from the start (0 before the first transaction).
"""

from __future__ import annotations

import dataclasses

END_OUTCOMES = ("commit", "rollback", "unknown", "refused")
CHECK_OUTCOMES = ("asked", "unasked", "discarded")


@dataclasses.dataclass(frozen=True)
class CheckPass:
    """The check service's figures at the end of a pass (module docstring)."""

    finished_ms: int
    half_offset: int
    """The check's progress on the half queue: every half below is ended or re-put."""
    half_max_offset: int
    op_offset: int
    op_max_offset: int
    ops_complete: bool
    """The pass read every op message the store held (else `waiting` is an upper bound)."""
    waiting: int


@dataclasses.dataclass
class TransactionCounts:
    ends: dict[tuple[str, bool], int] = dataclasses.field(
        default_factory=lambda: {(outcome, from_check): 0 for outcome in END_OUTCOMES
                                 for from_check in (False, True)})
    """END_TRANSACTION (37) handled, by outcome and whether it answered a check."""
    checks: dict[str, int] = dataclasses.field(
        default_factory=lambda: dict.fromkeys(CHECK_OUTCOMES, 0))
    """Halves the check service took up, by outcome."""
    last_pass: CheckPass | None = None
    """None until the first pass ends."""

    def end(self, outcome: str, *, from_check: bool) -> None:
        assert outcome in END_OUTCOMES, outcome
        self.ends[(outcome, from_check)] += 1

    def check(self, outcome: str) -> None:
        assert outcome in CHECK_OUTCOMES, outcome
        self.checks[outcome] += 1
