"""A consume queue whose files could not be written: dispatch goes on without it and puts
its records again later (storage/dispatch/dispatcher.py, `replay_stalled`)."""

from __future__ import annotations

import dataclasses
import errno

DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
"""Errors of the whole disk, not of one queue's files: they stall all of dispatch."""
STALLED_QUEUES_MAX = 10_000
"""Stalled queues remembered; past it dispatch stops (a disk that fails every file is not
one queue's trouble)."""


@dataclasses.dataclass(frozen=True)
class StalledQueue:
    """A queue whose file could not be written: from `physical_offset` (the first record it
    could not take, queue offset `queue_offset`) its records wait for `replay_stalled`."""

    topic: str
    queue_id: int
    physical_offset: int
    queue_offset: int
    reason: str
