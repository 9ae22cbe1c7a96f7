"""Slow clients (issue 17, Found 3): stalled headers and bodies are closed after their
timeouts, and one client's stalled puts cannot take every admission slot from another's."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.services.writer.app import METRICS
from mqstore.storage import MessageStore
from tests.abuse.http_abuse import (
    closed,
    connect,
    read_answer,
    request,
    served,
    wait_until,
)
from tests.conftest import small_config
from tests.services.serving import run

PUT = "/v1/topics/T/messages"
STALLED_PUT = (f"POST {PUT} HTTP/1.1\r\nHost: mqstore\r\nContent-Type: application/json\r\n"
               f"Content-Length: 100\r\n\r\n{{\"body\": ").encode()
"""Headers complete, body promised (100 bytes) and never finished."""
def in_flight(app: web.Application) -> float:
    """Put requests admitted and not answered (the writer's own gauge)."""
    value = app[METRICS].registry.get_sample_value("mqstore_put_requests_in_flight")
    assert value is not None
    return value


GOOD_PUT = (f"POST {PUT} HTTP/1.1\r\nHost: mqstore\r\nContent-Type: application/json\r\n"
            f"Content-Length: 13\r\n\r\n{{\"body\": \"x\"}}").encode()


def test_stalled_headers_are_answered_408_and_closed(tmp_path: Path) -> None:
    async def scenario() -> None:
        with MessageStore.open(tmp_path / "store", small_config()) as store:
            app = create_app(store, WriterSettings())
            async with served(app, header_read_timeout_ms=100) as port:
                reader, writer = await connect(port)
                writer.write(b"POST /v1/topics/T/messages HTTP/1.1\r\nHost: mqs")
                answer = await read_answer(reader)
                assert answer.status == 408
                assert answer.error_status == "REQUEST_TIMEOUT"
                assert await closed(reader)
                writer.close()

    run(scenario)


def test_a_stalled_body_is_answered_408_and_frees_its_slot(tmp_path: Path) -> None:
    async def scenario() -> None:
        with MessageStore.open(tmp_path / "store", small_config()) as store:
            app = create_app(store, WriterSettings(body_read_timeout_ms=100))
            async with served(app) as port:
                reader, writer = await connect(port)
                writer.write(STALLED_PUT)
                answer = await read_answer(reader)
                assert answer.status == 408
                assert answer.error_status == "REQUEST_TIMEOUT"
                assert "body_read_timeout_ms" in answer.body.decode()
                assert await closed(reader)
                writer.close()
                assert in_flight(app) == 0

    run(scenario)


def test_one_clients_stalled_puts_leave_slots_for_another(tmp_path: Path) -> None:
    """The hostile client (127.0.0.2) stalls as many puts as there are slots; the writer
    keeps its share to 2 (429 for the rest), so 127.0.0.3 still produces."""
    async def scenario() -> None:
        with MessageStore.open(tmp_path / "store", small_config()) as store:
            settings = WriterSettings(put_requests_in_flight_max=4,
                                      put_requests_per_client_max=2)
            app = create_app(store, settings)
            async with served(app) as port:
                stalled = [await connect(port, client="127.0.0.2") for _ in range(4)]
                for _, writer in stalled:
                    writer.write(STALLED_PUT)
                refused = []
                for reader, _ in stalled[2:]:
                    refused.append(await read_answer(reader))
                await wait_until(lambda: in_flight(app) == 2, "two puts admitted")
                assert [answer.status for answer in refused] == [429, 429]
                assert "put_requests_per_client_max" in refused[0].body.decode()
                served_put = await request(port, GOOD_PUT, client="127.0.0.3")
                assert served_put.status == 200, served_put.body
                for _, writer in stalled:
                    writer.close()

    run(scenario)


def test_readyz_says_so_while_every_put_slot_is_taken(tmp_path: Path) -> None:
    async def scenario() -> None:
        with MessageStore.open(tmp_path / "store", small_config()) as store:
            app = create_app(store, WriterSettings(put_requests_in_flight_max=2))
            async with served(app) as port:
                stalled = []
                for client in ("127.0.0.2", "127.0.0.3"):
                    _, writer = await connect(port, client=client)
                    writer.write(STALLED_PUT)
                    stalled.append(writer)
                await wait_until(lambda: in_flight(app) == 2, "both admitted")
                ready = await request(port, b"GET /readyz HTTP/1.1\r\nHost: m\r\n\r\n")
                assert ready.status == 503
                assert "put_requests_in_flight_max" in ready.body.decode()
                for writer in stalled:
                    writer.close()
                await wait_until(lambda: in_flight(app) == 0, "slots freed")
                ready = await request(port, b"GET /readyz HTTP/1.1\r\nHost: m\r\n\r\n")
                assert ready.status == 200

    run(scenario)

