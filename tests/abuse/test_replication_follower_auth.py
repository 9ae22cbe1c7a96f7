"""Issue 17, Found 1: the replication port served the whole log to anyone, let a fake follower
turn a sync master's SLAVE_NOT_AVAILABLE into PUT_OK, and let anyone hold the follower slots.

A master here serves with a replication secret; the "attackers" are raw sockets that do not
know it.  Each test fails on the code before the handshake
(services/writer/replication_handshake.py): there the sockets got log bytes, PUT_OK and held
the slots."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from mqstore.services.common.links.mutual_proof import HELLO
from mqstore.services.common.settings.replication import ReplicationSettings
from mqstore.services.writer.replication_follower import ReplicationClient
from mqstore.services.writer.replication_master import ReplicationServer
from mqstore.services.writer.replication_protocol import (
    FrameReader,
    ProtocolError,
    encode_report,
)
from mqstore.storage import BrokerRole, Message, MessageStore, PutStatus
from tests.conftest import small_config
from tests.services.replication_peer import handshake, open_follower
from tests.services.serving import run

SECRET = b"0123456789abcdef0123456789abcdef"
BODY = b"confidential-body-"
READ_TIMEOUT_S = 30.0
"""Generous bound on waiting for a connection to end (never a measured duration)."""


def secret_file(tmp_path: Path, secret: bytes = SECRET) -> str:
    path = tmp_path / "replication-secret"
    path.write_bytes(secret + b"\n")
    return str(path)


def settings(tmp_path: Path, **overrides: object) -> ReplicationSettings:
    values: dict[str, object] = {
        "host": "127.0.0.1", "secret_file": secret_file(tmp_path),
        "heartbeat_interval_ms": 100, "housekeeping_interval_ms": 400,
        "reconnect_interval_ms": 50, "handshake_timeout_ms": 300, **overrides}
    return ReplicationSettings(**values)  # type: ignore[arg-type]


def open_master(tmp_path: Path, *, role: BrokerRole = BrokerRole.ASYNC_MASTER,
                **overrides: object) -> tuple[MessageStore, ReplicationServer]:
    server = ReplicationServer(settings(tmp_path, **overrides))
    config = small_config(role=role, replication_sync_timeout_ms=500)
    store = MessageStore.open(tmp_path / "master", config, on_readable=server.notify)
    for index in range(20):
        assert store.put(Message("Secret", 0, BODY + str(index).encode())).status in (
            PutStatus.PUT_OK, PutStatus.SLAVE_NOT_AVAILABLE)
    return store, server


@contextlib.asynccontextmanager
async def serving(store: MessageStore, server: ReplicationServer) -> AsyncIterator[int]:
    await server.start(store)
    try:
        yield server.port
    finally:
        await server.close()


async def read_to_end(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), READ_TIMEOUT_S)


def test_a_zero_position_from_an_unauthenticated_socket_gets_no_log_byte(
        tmp_path: Path) -> None:
    store, server = open_master(tmp_path)

    async def scenario() -> bytes:
        async with serving(store, server) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(encode_report(0))  # "I am an empty follower: send everything"
            received = await read_to_end(reader)
            writer.close()
            return received

    received = run(scenario)
    store.close()
    assert BODY not in received
    assert len(received) == HELLO.size  # the master's nonce, then the close


def test_a_wrong_secret_gets_no_log_byte(tmp_path: Path) -> None:
    store, server = open_master(tmp_path)

    async def scenario() -> bytes:
        async with serving(store, server) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            with contextlib.suppress(asyncio.IncompleteReadError):
                await handshake(reader, writer, secret=b"not-the-secret-at-all")
            writer.write(encode_report(0))
            received = await read_to_end(reader)
            writer.close()
            return received

    received = run(scenario)
    store.close()
    assert received == b""


def test_a_fake_follower_confirming_every_frame_does_not_make_a_sync_master_answer_put_ok(
        tmp_path: Path) -> None:
    store, server = open_master(tmp_path, role=BrokerRole.SYNC_MASTER)

    async def fake_follower(port: int, received: asyncio.Event) -> None:
        """Asks for everything, stores nothing, confirms the end of every frame it sees."""
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(encode_report(0))
        frames = FrameReader(frame_bytes_max=1 << 30)
        ends: list[int] = []
        try:
            while data := await reader.read(1 << 16):
                received.set()
                with contextlib.suppress(ProtocolError):
                    frames.feed(data, lambda position, chunk: ends.append(
                        position + len(chunk)))
                if ends:
                    writer.write(encode_report(max(ends)))
        finally:
            received.set()
            writer.close()

    async def scenario() -> PutStatus:
        async with serving(store, server) as port:
            received = asyncio.Event()
            faker = asyncio.create_task(fake_follower(port, received))
            await asyncio.wait_for(received.wait(), READ_TIMEOUT_S)
            result = await asyncio.wrap_future(store.submit(Message("Secret", 0, b"sync")))
            faker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await faker
            return result.status

    status = run(scenario)
    store.close()
    assert status is PutStatus.SLAVE_NOT_AVAILABLE


def test_unauthenticated_sockets_hold_the_follower_slots_no_longer_than_the_handshake(
        tmp_path: Path) -> None:
    store, server = open_master(tmp_path, followers_max=2, heartbeat_interval_ms=20_000,
                                housekeeping_interval_ms=60_000)
    follower = MessageStore.open(tmp_path / "follower",
                                 small_config(role=BrokerRole.FOLLOWER))

    async def scenario() -> list[bytes]:
        async with serving(store, server) as port:
            squatters = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
            squatters[1][1].write(encode_report(0))  # one silent, one that asks for the log
            ended = [await read_to_end(reader) for reader, _ in squatters]
            client = ReplicationClient(follower, settings(
                tmp_path, master=f"127.0.0.1:{port}", host="127.0.0.1"))
            client.start()
            try:
                while follower.written_position < store.written_position:
                    await asyncio.sleep(0.01)
            finally:
                await client.close()
            for _, writer in squatters:
                writer.close()
            return ended

    ended = asyncio.run(asyncio.wait_for(scenario(), READ_TIMEOUT_S * 2))
    assert [len(received) for received in ended] == [HELLO.size, HELLO.size]
    assert follower.written_position == store.written_position
    follower.close()
    store.close()


def test_a_follower_with_the_secret_is_served(tmp_path: Path) -> None:
    """The counterpart of the tests above: the same master serves a follower that knows."""
    store, server = open_master(tmp_path)

    async def scenario() -> bytes:
        async with serving(store, server) as port:
            reader, writer = await open_follower(port, secret=SECRET)
            writer.write(encode_report(0))
            data = await asyncio.wait_for(reader.read(1 << 20), READ_TIMEOUT_S)
            writer.close()
            return data

    assert BODY in run(scenario)
    store.close()
