"""Where an indexer learns about the commit log: `LogBounds` from a `LogSource`.

Two sources: the embedded store's own segment list (`SegmentListSource`, here), and the
writer's published `positions` for an indexer in a process of its own (published_log.py).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from ..log.segment_list import SegmentList


class LogBounds(NamedTuple):
    """What a log source says about the commit log at one instant."""

    min_position: int
    committed_position: int
    """Records below it are whole and readable: dispatch reads up to here."""
    generation: int | None
    """Changes when a new writer opened the log (its recovery may have cut it); None for the
    store's own log, which never changes writer under its indexer."""
    recovered_end_position: int
    """Where that writer's recovery found the log's valid end."""


class LogSource(Protocol):
    def bounds(self) -> LogBounds | None:
        """The log's bounds now, or None if no writer has opened the directory yet."""


class SegmentListSource:
    """The embedded store's own log: one generation, already recovered."""

    def __init__(self, segment_list: SegmentList) -> None:
        self._segment_list = segment_list
        self.recovered_end_position = 0
        """Set by the store's recovery (opening.py)."""

    def bounds(self) -> LogBounds:
        segment_list = self._segment_list
        return LogBounds(min_position=segment_list.min_position,
                         committed_position=segment_list.committed_position,
                         generation=None,
                         recovered_end_position=self.recovered_end_position)
