"""Status conditions (the Kubernetes `metav1.Condition` shape) whose lastTransitionTime
changes only when a condition's status does: kopf has no helper for this."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
PAUSED = "ReconciliationPaused"
CONDITION_TYPES = (READY, PROGRESSING, DEGRADED, PAUSED)


@dataclasses.dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str = ""

    @property
    def status_text(self) -> str:
        return "True" if self.status else "False"


def merge_conditions(old: Sequence[Mapping[str, Any]], new: Sequence[Condition], *,
                     now: str, generation: int) -> list[dict[str, Any]]:
    """The conditions to store: `new`, in order, each keeping its old lastTransitionTime
    when its status did not change; `now` otherwise.  Types not in `new` are dropped."""
    previous = {item.get("type"): item for item in old}
    merged = []
    for condition in new:
        before = previous.get(condition.type)
        unchanged = before is not None and before.get("status") == condition.status_text
        since = before.get("lastTransitionTime") if before is not None and unchanged else None
        merged.append({"type": condition.type, "status": condition.status_text,
                       "reason": condition.reason, "message": condition.message,
                       "lastTransitionTime": since or now,
                       "observedGeneration": generation})
    return merged


def newly_true(old: Sequence[Mapping[str, Any]], new: Sequence[Condition],
               condition_type: str) -> Condition | None:
    """`condition_type` if it turned True, or stayed True with another reason: worth an
    Event, where a condition that stays as it was is not (the timer re-derives it often)."""
    now_condition = next((c for c in new if c.type == condition_type), None)
    if now_condition is None or not now_condition.status:
        return None
    before = next((c for c in old if c.get("type") == condition_type), None)
    if before is not None and before.get("status") == "True" \
            and before.get("reason") == now_condition.reason:
        return None
    return now_condition
