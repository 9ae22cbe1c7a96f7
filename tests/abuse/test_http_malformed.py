"""Malformed HTTP (issue 17, Found 6): the uniform JSON error body (400), logged without a
traceback and below WARNING, by every service."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.storage import MessageStore
from tests.abuse.http_abuse import closed, connect, read_answer, served
from tests.conftest import small_config
from tests.services.notifier_stack import notifier_app, settings
from tests.services.serving import run

MALFORMED = {
    "bad request line": b"HELLO THERE\r\n\r\n",
    "bad method": b"G\x01T / HTTP/1.1\r\nHost: m\r\n\r\n",
    "header without a colon": b"GET /healthz HTTP/1.1\r\nHost: m\r\nNoColonHere\r\n\r\n",
    "bad content length": b"POST /v1/batch HTTP/1.1\r\nHost: m\r\nContent-Length: -5\r\n\r\n",
    "header line too long": b"GET /healthz HTTP/1.1\r\nHost: m\r\nX-Long: " + b"a" * 20_000
                            + b"\r\n\r\n",
}


def _check_logs(caplog: pytest.LogCaptureFixture) -> None:
    loud = [record for record in caplog.records
            if record.levelno >= logging.WARNING or record.exc_info]
    assert not loud, [(record.name, record.getMessage()) for record in loud]


async def _refused(port: int, raw: bytes) -> None:
    reader, writer = await connect(port)
    writer.write(raw)
    answer = await read_answer(reader)
    assert answer.status == 400, answer.body
    assert answer.error_status == "BAD_REQUEST"
    assert await closed(reader)
    writer.close()


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
def test_the_writer_answers_malformed_http_in_json_quietly(
        tmp_path: Path, raw: bytes, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        with MessageStore.open(tmp_path / "store", small_config()) as store:
            async with served(create_app(store, WriterSettings())) as port:
                await _refused(port, raw)

    run(scenario)
    _check_logs(caplog)


def test_the_notifier_answers_malformed_http_in_json_quietly(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        async with notifier_app(tmp_path, settings()) as (_, app, _), served(app) as port:
            await _refused(port, MALFORMED["header without a colon"])

    run(scenario)
    _check_logs(caplog)
