"""Structured logs: one JSON object per line on stderr, for every service.

    {"ts": "2026-11-21T10:28:01.123Z", "level": "info", "logger": "mqstore.writer",
     "msg": "listening", "service": "writer", "port": 8081}

Fields passed with `extra=` become top-level keys (their names must not be one of the five
above).  An exception adds `exc` with the formatted traceback.  Values JSON cannot encode are
written with `repr`.  Log aggregators (Loki, Elasticsearch) index such lines without parsing
rules.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import TextIO

_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime", "taskName"}
"""LogRecord's own attributes: everything else on a record came from `extra=`."""


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line with the service name on every line."""

    def __init__(self, *, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        line: dict[str, object] = {
            "ts": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "service": self.service,
        }
        for name, value in record.__dict__.items():
            if name not in _RESERVED and name not in line:
                line[name] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=repr, ensure_ascii=False)


def configure_logging(*, service: str, level: str, stream: TextIO | None = None) -> None:
    """Send every logger's records, as JSON lines, to `stream` (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(service=service))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # aiohttp logs each request at INFO through its access logger; the writer logs its own
    # when `access_log_enabled`, so keep aiohttp's at WARNING.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
