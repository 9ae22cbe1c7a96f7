"""Structured logs: one JSON object per line, the service on every line, extras as keys."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from mqstore.services.common.observability.logs import configure_logging


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    configure_logging(service="writer", level="debug", stream=stream)
    yield stream
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])


def test_a_line_is_json_with_the_service_and_the_extras(captured: io.StringIO) -> None:
    logging.getLogger("mqstore.writer").info("listening on %s", "there",
                                             extra={"port": 8081, "path": object()})
    logging.getLogger("mqstore.writer").debug("détail")
    first, second = (json.loads(line) for line in captured.getvalue().splitlines())
    assert first["msg"] == "listening on there"
    assert (first["level"], first["logger"], first["service"]) == ("info", "mqstore.writer",
                                                                   "writer")
    assert first["port"] == 8081
    assert first["path"].startswith("<object object")  # not JSON: written with repr
    assert first["ts"].endswith("Z")
    assert second["msg"] == "détail"


def test_an_exception_adds_its_traceback(captured: io.StringIO) -> None:
    try:
        raise OSError(28, "No space left on device")
    except OSError:
        logging.getLogger("mqstore.writer").exception("put failed")
    line = json.loads(captured.getvalue())
    assert line["level"] == "error"
    assert "No space left on device" in line["exc"]
    assert "Traceback" in line["exc"]
