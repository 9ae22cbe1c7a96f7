"""Oversized bodies (issue 17, Found 3): refused with 413 before a byte of them is read, and
the connection closed instead of held open for a body that never comes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.storage import MessageStore
from tests.abuse.http_abuse import closed, connect, read_answer, served
from tests.conftest import small_config
from tests.services.serving import run

NINE_MB = 9_000_000
ONE_TB = 1 << 40


@pytest.mark.parametrize("path", ["/v1/topics/T/messages", "/v1/topics/T/messages/batch",
                                  "/v1/batch"])
def test_expect_100_continue_with_an_oversized_length_gets_413(tmp_path: Path,
                                                               path: str) -> None:
    async def scenario() -> None:
        with MessageStore.open(tmp_path / "store", small_config()) as store:
            async with served(create_app(store, WriterSettings())) as port:
                reader, writer = await connect(port)
                writer.write(f"POST {path} HTTP/1.1\r\nHost: m\r\nContent-Type: "
                             f"application/json\r\nContent-Length: {NINE_MB}\r\n"
                             f"Expect: 100-continue\r\n\r\n".encode())
                answer = await read_answer(reader)
                assert answer.status == 413
                assert answer.error_status == "REQUEST_ENTITY_TOO_LARGE"
                assert await closed(reader)
                writer.close()

    run(scenario)


def test_a_terabyte_length_without_a_body_gets_413_and_the_connection_closes(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        with MessageStore.open(tmp_path / "store", small_config()) as store:
            async with served(create_app(store, WriterSettings())) as port:
                reader, writer = await connect(port)
                writer.write(f"POST /v1/topics/T/messages HTTP/1.1\r\nHost: m\r\n"
                             f"Content-Type: application/json\r\nContent-Length: {ONE_TB}"
                             f"\r\n\r\n".encode())
                answer = await read_answer(reader)
                assert answer.status == 413
                assert str(ONE_TB) in answer.body.decode()
                assert await closed(reader)
                writer.close()
                assert store.committed_position == 0

    run(scenario)
