"""`RetryCounts`: what the front did with consumers' failed messages since it started.

retries.py and the HTTP nacks count, the notifier's metrics read the totals at scrape time
(services/notifier/metrics.py):

| count                        | when                                                     |
|------------------------------|----------------------------------------------------------|
| `send_backs["retry"]`        | a CONSUMER_SEND_MSG_BACK (36) whose copy the writer      |
|                              | stored for `%RETRY%<group>` (waiting its delay level)    |
| `send_backs["dead_letter"]`  | one whose copy went to `%DLQ%<group>` (past the max, or  |
|                              | delay level -1)                                          |
| `send_backs["refused"]`      | one answered with an error (no message at the offset, a  |
|                              | bad header, the writer refused the copy): the client     |
|                              | then sends the message to its retry topic itself         |
| `dead_letters["send_back"]`  | the same as `send_backs["dead_letter"]`                  |
| `dead_letters["retry_send"]` | a client's own send to `%RETRY%<group>` past its max,    |
|                              | routed to `%DLQ%<group>`; counted when routed (the       |
|                              | writer's refusal of it, rare, shows in its put statuses) |
| `nacks[outcome]`             | an HTTP nack (services/notifier/nacks.py), by the same   |
|                              | outcomes as a send-back                                  |
| `dead_letters["nack"]`       | the same as `nacks["dead_letter"]`                       |

Plain integers on the event loop, no lock: every handler runs on the notifier's loop, and a
scrape reads them there too.  The label values are fixed, so the series are few and always
present (0 before the first send-back).
"""

from __future__ import annotations

import dataclasses

SEND_BACK_OUTCOMES = ("retry", "dead_letter", "refused")
DEAD_LETTER_PATHS = ("send_back", "retry_send", "nack")


@dataclasses.dataclass
class RetryCounts:
    send_backs: dict[str, int] = dataclasses.field(
        default_factory=lambda: dict.fromkeys(SEND_BACK_OUTCOMES, 0))
    """Send-backs (36) answered, by outcome."""
    dead_letters: dict[str, int] = dataclasses.field(
        default_factory=lambda: dict.fromkeys(DEAD_LETTER_PATHS, 0))
    """Messages routed to a `%DLQ%` topic, by the path that sent them there."""
    nacks: dict[str, int] = dataclasses.field(
        default_factory=lambda: dict.fromkeys(SEND_BACK_OUTCOMES, 0))
    """HTTP nacks answered, by outcome."""

    def send_back(self, outcome: str) -> None:
        assert outcome in SEND_BACK_OUTCOMES, outcome
        self.send_backs[outcome] += 1
        if outcome == "dead_letter":
            self.dead_letters["send_back"] += 1

    def nack(self, outcome: str) -> None:
        assert outcome in SEND_BACK_OUTCOMES, outcome
        self.nacks[outcome] += 1
        if outcome == "dead_letter":
            self.dead_letters["nack"] += 1

    def retry_send_dead_lettered(self) -> None:
        self.dead_letters["retry_send"] += 1
