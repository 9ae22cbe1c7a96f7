"""`PublishedLog`: the commit log as the writer publishes it in `positions`, for an indexer
in a process of its own (the embedded store's indexer reads its own segment list instead).

Read before every dispatch pass: the committed position (records below it are whole), the
log's start, and the writer's generation with the end its recovery found.  Nothing here
acts on them; the `Indexer` decides (a new generation may mean a cut log).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import StoreFormatError
from ..files.watermarks import PositionsFile
from ..format import volume
from .log_source import LogBounds

log = logging.getLogger(__name__)


class PublishedLog:
    def __init__(self, directory: Path) -> None:
        self.path = directory / volume.POSITIONS_FILE
        self._file: PositionsFile | None = None
        self.published: dict[str, int] | None = None
        """The writer's last publish as read, or None before any."""
        self.problem: str | None = None
        """Why `positions` cannot be read (dispatch waits meanwhile), or None."""

    def bounds(self) -> LogBounds | None:
        try:
            if self._file is None:
                self._file = PositionsFile(self.path, writable=False)
            found = self._file.read()
        except FileNotFoundError:
            return None  # no writer has opened the directory yet
        except StoreFormatError as error:
            if self.problem is None:
                log.error("cannot read the writer's positions; dispatch waits: %s", error)
            self.problem = str(error)
            return None
        self.problem = None
        if found is None:
            return None
        self.published = found[1]
        return LogBounds(min_position=self.published["min_position"],
                         committed_position=self.published["committed_position"],
                         generation=self.published["generation"],
                         recovered_end_position=self.published["recovered_end_position"])

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
