"""The forward port is the front's alone (issue 22, finding 7).

Before, anyone who could reach the writer's forward port stored to any non-system topic,
with a forged born host and time, into %RETRY% topics and into a queue the topic does not
have, whatever the users file said.  Now a connection must prove the secret the writer
publishes in its data directory (owner-only, new at every start) before a request is read,
the front checks the writer's proof back, and connections that do not prove in time are
closed and cannot crowd the front out.
"""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mqstore.services.common.links.forward_secret import publish_secret, secret_path
from mqstore.services.common.links.forward_wire import KIND_SINGLE, ForwardRequest, encode_request
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting.codes import SYSTEM_ERROR, RemotingError
from mqstore.services.notifier.remoting.writer_link import WriterLink
from mqstore.services.writer.app import PRODUCE, create_app
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.storage import MessageStore, StoreConfig
from tests.services.serving import run

GUARD_S = 10.0
FORGED = ForwardRequest(0, KIND_SINGLE, 7, 0, 0, 946_684_800_000, 3, "6.6.6.6:666",
                        "%RETRY%billing", b"RETRY_TOPIC\x01Orders\x02", b"forged")
"""A send to queue 7 of a 4-queue topic's retry topic, born at 2000-01-01 on a made-up host."""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    opened = MessageStore.open(tmp_path / "store", StoreConfig.for_small_segments(1 << 20))
    yield opened
    opened.close()


@asynccontextmanager
async def listening(store: MessageStore, **settings: Any) -> AsyncIterator[int]:
    writer_settings = WriterSettings(forward_port=0, topic_queue_count=8, **settings)
    server = ForwardServer(create_app(store, writer_settings)[PRODUCE], writer_settings)
    port = await server.start(data_dir=store.directory)
    try:
        yield port
    finally:
        await server.close()


def link(port: int, directory: Path) -> WriterLink:
    return WriterLink(RemotingSettings(writer_address=f"127.0.0.1:{port}", writer_timeout_ms=
                                       3_000), secret_path=secret_path(directory))


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    try:
        async with asyncio.timeout(GUARD_S):
            while await reader.read(65536):
                pass  # the writer's hello, then the close
            return True
    except ConnectionError:
        return True


def test_a_peer_without_the_secret_stores_nothing(store: MessageStore) -> None:
    async def scenario() -> None:
        async with listening(store) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.writelines(encode_request(FORGED))
            assert await closed_by_peer(reader)
            writer.close()

    run(scenario)
    assert store.written_position == 0


def test_a_front_with_another_secret_is_refused_and_stores_nothing(
        store: MessageStore, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    publish_secret(elsewhere)

    async def scenario() -> None:
        async with listening(store) as port:
            with pytest.raises(RemotingError, match="refused the link") as refused:
                await link(port, elsewhere).send(FORGED._replace(queue_id=0, topic="Orders"))
            assert refused.value.code == SYSTEM_ERROR

    run(scenario)
    assert store.written_position == 0


def test_the_front_with_the_secret_stores(store: MessageStore) -> None:
    async def scenario() -> str:
        async with listening(store) as port:
            front = link(port, store.directory)
            try:
                answer = await front.send(FORGED._replace(queue_id=1, topic="Orders"))
            finally:
                await front.close()
            return answer.status

    assert run(scenario) == "PUT_OK"


def test_the_secret_is_owner_only_new_at_each_start_and_withdrawn_at_stop(
        store: MessageStore) -> None:
    path = secret_path(store.directory)

    async def secret_while_listening() -> bytes:
        async with listening(store):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            return path.read_bytes()

    first = run(secret_while_listening)
    assert not path.exists()
    assert run(secret_while_listening) != first


def test_silent_connections_are_closed_and_cannot_crowd_the_front_out(
        store: MessageStore) -> None:
    async def scenario() -> str:
        async with listening(store, forward_connections_max=4,
                             forward_frame_read_timeout_ms=1_500) as port:
            silent = [await asyncio.open_connection("127.0.0.1", port) for _ in range(8)]
            front = link(port, store.directory)
            try:
                answer = await front.send(FORGED._replace(queue_id=1, topic="Orders"))
            finally:
                await front.close()
            closed = await asyncio.gather(*(closed_by_peer(reader) for reader, _ in silent))
            assert all(closed)  # 4 made room, the rest met the handshake deadline
            for _, writer in silent:
                writer.close()
            return answer.status

    assert run(scenario) == "PUT_OK"


def test_a_connection_that_never_proves_is_closed_at_the_deadline(store: MessageStore) -> None:
    async def scenario() -> None:
        async with listening(store, forward_frame_read_timeout_ms=200) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\0\0\0\x40")  # a proof's length, and never the proof
            assert await closed_by_peer(reader)
            writer.close()

    run(scenario)
