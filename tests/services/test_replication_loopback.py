"""Replication over loopback TCP inside one process: the master's `ReplicationServer` and a
follower's `ReplicationClient` on one event loop, each with its own store directory."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
import uvloop

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.common.settings.replication import ReplicationSettings
from mqstore.services.writer import create_app
from mqstore.services.writer.openapi import writer_openapi
from mqstore.services.writer.replication_follower import ReplicationClient
from mqstore.services.writer.replication_master import ReplicationServer
from mqstore.services.writer.replication_protocol import (
    FRAME_HEAD,
    FrameReader,
    ProtocolError,
    ReportReader,
    encode_frame_head,
    encode_report,
)
from mqstore.storage import (
    BrokerRole,
    ConfigError,
    Message,
    MessageStore,
    PutStatus,
    StoreConfig,
)
from tests.conftest import small_config
from tests.services.replication_peer import open_follower
from tests.services.schema_check import check
from tests.services.serving import run

T = TypeVar("T")
LOOPS = ["asyncio", "uvloop"]


def run_on(event_loop: str, scenario: Callable[[], Awaitable[T]]) -> T:
    """The writer runs on uvloop by default: its transports differ from asyncio's."""
    async def main() -> T:
        return await scenario()

    return uvloop.run(main()) if event_loop == "uvloop" else asyncio.run(main())


FAST = {"heartbeat_interval_ms": 100, "housekeeping_interval_ms": 400,
        "reconnect_interval_ms": 50, "batch_bytes_max": 16 * 1024}


async def until(condition: Callable[[], bool], *, timeout_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


def open_master(directory: Path, config: StoreConfig,
                **settings: object) -> tuple[MessageStore, ReplicationServer]:
    """A master store and its replication server (the store wakes the server's senders)."""
    server = ReplicationServer(ReplicationSettings(host="127.0.0.1", **{**FAST, **settings}))
    return MessageStore.open(directory, config, on_readable=server.notify), server


@contextlib.asynccontextmanager
async def serving(master: MessageStore,
                  server: ReplicationServer) -> AsyncIterator[ReplicationServer]:
    await server.start(master)
    try:
        yield server
    finally:
        await server.close()


@contextlib.asynccontextmanager
async def following(store: MessageStore, port: int) -> AsyncIterator[ReplicationClient]:
    client = ReplicationClient(store, ReplicationSettings(master=f"127.0.0.1:{port}", **FAST))
    client.start()
    try:
        yield client
    finally:
        await client.close()


def follower_store(directory: Path) -> MessageStore:
    return MessageStore.open(directory, small_config(role=BrokerRole.FOLLOWER))


def put_many(store: MessageStore, count: int, *, start: int = 0) -> None:
    for index in range(start, start + count):
        result = store.put(Message("Loop", index % 4, f"m{index}".encode() * 100))
        assert result.status is PutStatus.PUT_OK, result


def segments(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (directory / "commitlog").iterdir()}


@pytest.mark.parametrize("event_loop", LOOPS)
def test_catch_up_from_empty_then_live_is_byte_identical(tmp_path: Path,
                                                         event_loop: str) -> None:
    master, server = open_master(tmp_path / "m", small_config())
    follower = follower_store(tmp_path / "f")
    put_many(master, 400)  # several 64 KiB segments before the follower exists

    async def scenario() -> int:
        async with serving(master, server), following(follower, server.port) as client:
            await until(lambda: follower.written_position == master.written_position)
            put_many(master, 300, start=400)  # live: frames as the appends come
            await until(lambda: follower.written_position == master.written_position)
            await until(lambda: bool(server.progress.followers()) and
                        server.progress.followers()[0].confirmed_position ==
                        master.written_position)
            assert client.state.connected
            return client.state.connections_total

    assert run_on(event_loop, scenario) == 1
    end = master.written_position
    master.close()
    follower.close()
    mine, theirs = segments(tmp_path / "m"), segments(tmp_path / "f")
    written = sorted(name for name in mine if int(name) < end)
    assert len(written) >= 4
    assert all(mine[name] == theirs[name] for name in written)


def test_a_follower_knows_its_lag_from_frames_without_a_heartbeat(tmp_path: Path) -> None:
    """The master heartbeats only when idle; a follower of a busy master must still report
    its lag (a lower bound) from the frames it receives."""
    master, server = open_master(tmp_path / "m", small_config(), heartbeat_interval_ms=60_000,
                                 housekeeping_interval_ms=120_000)
    follower = follower_store(tmp_path / "f")
    put_many(master, 50)

    async def scenario() -> tuple[int | None, int | None]:
        async with serving(master, server), \
                following(follower, server.port) as client:
            assert client.lag_bytes is None  # nothing received yet
            await until(lambda: follower.written_position == master.written_position)
            return client.state.master_position, client.lag_bytes

    master_position, lag_bytes = run(scenario)
    assert (master_position, lag_bytes) == (master.written_position, 0)
    master.close()
    follower.close()


def test_a_lagging_follower_catches_up_from_its_end(tmp_path: Path) -> None:
    master, server = open_master(tmp_path / "m", small_config())
    put_many(master, 100)

    async def copy_once() -> None:
        follower = follower_store(tmp_path / "f")
        async with serving(master, server), following(follower, server.port):
            await until(lambda: follower.written_position == master.written_position)
        follower.close()

    run(copy_once)
    first_end = master.written_position
    put_many(master, 300, start=100)
    run(copy_once)
    with follower_store(tmp_path / "f") as follower:
        assert follower.written_position == master.written_position > first_end
        assert [m.body for m in follower.iter_messages()] == \
            [m.body for m in master.iter_messages()]
    master.close()


@pytest.mark.parametrize("event_loop", LOOPS)
def test_sync_master_acknowledges_after_the_follower_and_times_out_without(
        tmp_path: Path, event_loop: str) -> None:
    config = small_config(role=BrokerRole.SYNC_MASTER, replication_sync_timeout_ms=500)
    master, server = open_master(tmp_path / "m", config)
    follower = follower_store(tmp_path / "f")

    async def put(body: bytes) -> PutStatus:
        return (await asyncio.wrap_future(master.submit(Message("S", 0, body)))).status

    async def scenario() -> list[PutStatus]:
        statuses = [await put(b"nobody")]
        async with serving(master, server):
            async with following(follower, server.port):
                await until(lambda: bool(server.progress.followers()))
                statuses += [await put(b"a"), await put(b"b")]
                assert follower.written_position == master.written_position
            # The follower left: within the lag bound no more; nobody can confirm.
            await until(lambda: not server.progress.followers())
            statuses.append(await put(b"gone"))
        return statuses

    assert run_on(event_loop, scenario) == [
        PutStatus.SLAVE_NOT_AVAILABLE, PutStatus.PUT_OK, PutStatus.PUT_OK,
        PutStatus.SLAVE_NOT_AVAILABLE]
    master.close()
    follower.close()


def test_sync_master_with_pool_is_acknowledged_without_waiting_for_the_commit_service(
        tmp_path: Path) -> None:
    """Commit service thresholds far out of reach: only commit on demand can make a put
    readable for the sender, so every PUT_OK here proves it."""
    config = small_config(role=BrokerRole.SYNC_MASTER, pool_enabled=True,
                          replication_sync_timeout_ms=2000, commit_interval_ms=60_000,
                          commit_thorough_interval_ms=60_000, commit_pages_min=1000)
    master, server = open_master(tmp_path / "m", config)
    follower = follower_store(tmp_path / "f")

    async def scenario() -> list[PutStatus]:
        async with serving(master, server), following(follower, server.port):
            await until(lambda: bool(server.progress.followers()))
            futures = [asyncio.wrap_future(master.submit(Message("P", 0, b"x" * 300)))
                       for _ in range(50)]
            return [result.status for result in await asyncio.gather(*futures)]

    assert set(run(scenario)) == {PutStatus.PUT_OK}
    master.close()
    follower.close()


@pytest.mark.parametrize("event_loop", LOOPS)
def test_a_silent_follower_is_disconnected_and_a_silent_master_is_left(
        tmp_path: Path, event_loop: str) -> None:
    master, server = open_master(tmp_path / "m", small_config())

    async def silent_follower() -> bytes:
        async with serving(master, server):
            reader, writer = await open_follower(server.port)
            writer.write(encode_report(0))
            await until(lambda: bool(server.progress.followers()))
            received = await asyncio.wait_for(reader.read(), timeout=5)  # until closed
            await until(lambda: not server.progress.followers())
            writer.close()
            return received

    heartbeat = run_on(event_loop, silent_follower)
    assert heartbeat[:FRAME_HEAD.size] == encode_frame_head(0, 0)  # an idle master's heartbeat

    async def silent_master() -> int:
        accepted: list[asyncio.StreamWriter] = []

        async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)  # says nothing, ever

        listener = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        with follower_store(tmp_path / "f") as follower:
            async with following(follower, port) as client:
                await until(lambda: client.state.connections_total >= 2)
                connections = client.state.connections_total
        listener.close()
        for writer in accepted:
            writer.close()
        return connections

    assert run_on(event_loop, silent_master) >= 2
    master.close()


def test_a_diverged_or_ahead_follower_is_refused(tmp_path: Path) -> None:
    master, server = open_master(tmp_path / "m", small_config())
    put_many(master, 10)

    async def report(position: int) -> bytes:
        async with serving(master, server):
            reader, writer = await open_follower(server.port)
            writer.write(encode_report(position))
            received = await asyncio.wait_for(reader.read(), timeout=5)
            writer.close()
            return received

    assert run(lambda: report(master.written_position + 100)) == b""  # past the end: closed
    assert run(lambda: report(7)) == b""  # not a record boundary: diverged
    master.close()


def test_frame_and_report_readers_reassemble_and_refuse() -> None:
    frames: list[tuple[int, bytes]] = []
    reader = FrameReader(frame_bytes_max=100)
    stream = (encode_frame_head(0, 3) + b"abc" + encode_frame_head(3, 0)
              + encode_frame_head(3, 2) + b"de")
    for byte in range(len(stream)):
        reader.feed(stream[byte:byte + 1], lambda p, d: frames.append((p, bytes(d))))
    assert frames == [(0, b"abc"), (3, b""), (3, b"de")]
    assert reader.buffered_bytes == 0
    try:
        FrameReader(frame_bytes_max=10).feed(encode_frame_head(0, 11), lambda p, d: None)
    except ProtocolError as error:
        assert "11 bytes" in str(error)
    else:
        raise AssertionError("an oversized frame was accepted")
    reports = ReportReader()
    assert reports.feed(encode_report(5)[:3]) is None
    assert reports.feed(encode_report(5)[3:] + encode_report(9) + b"\0") == 9


def test_a_followers_writer_refuses_produce_and_both_roles_report_status(
        tmp_path: Path) -> None:
    document = writer_openapi(StoreConfig(), WriterSettings())
    schema = document["paths"]["/v1/replication"]["get"]["responses"]["200"]["content"][
        "application/json"]["schema"]
    follower = follower_store(tmp_path / "f")
    client = ReplicationClient(follower, ReplicationSettings(master="127.0.0.1:9"))
    master = MessageStore.open(tmp_path / "m", StoreConfig.for_small_segments(
        64 * 1024, role=BrokerRole.SYNC_MASTER))

    async def scenario() -> list[tuple[int, dict[str, object]]]:
        from aiohttp.test_utils import TestClient, TestServer  # noqa: PLC0415

        answers = []
        async with TestClient(TestServer(create_app(follower, WriterSettings(),
                                                    follower=client))) as http:
            response = await http.post("/v1/topics/T/messages", json={"body": "x"})
            answers.append((response.status, await response.json()))
            response = await http.get("/v1/replication")
            answers.append((response.status, await response.json()))
        async with TestClient(TestServer(create_app(master, WriterSettings()))) as http:
            response = await http.get("/v1/replication")
            answers.append((response.status, await response.json()))
            metrics = await (await http.get("/metrics")).text()
            assert "mqstore_replication_followers 0.0" in metrics
            assert 'mqstore_commitlog_position_bytes{watermark="replicated"}' in metrics
        return answers

    (refused, body), (ok_f, follower_status), (ok_m, master_status) = run(scenario)
    assert refused == 403
    assert body["error"]["status"] == "SERVICE_NOT_AVAILABLE"  # type: ignore[index]
    assert "127.0.0.1:9" in json.dumps(body)
    assert (ok_f, follower_status["role"], follower_status["connected"]) == (200, "follower",
                                                                             False)
    assert (ok_m, master_status["role"], master_status["followers"],
            master_status["followers_in_sync"]) == (200, "sync_master", [], 0)
    for status in (follower_status, master_status):
        check(status, schema, root=document)
    follower.close()
    master.close()


def test_a_busy_replication_port_is_a_config_error(tmp_path: Path) -> None:
    master = MessageStore.open(tmp_path / "m", small_config())

    async def scenario() -> str:
        taken = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = taken.sockets[0].getsockname()[1]
        server = ReplicationServer(ReplicationSettings(host="127.0.0.1", port=port))
        try:
            await server.start(master)
        except ConfigError as error:
            return str(error)
        finally:
            taken.close()
        raise AssertionError("a busy port was accepted")

    assert "cannot listen on" in run(scenario)
    master.close()


def test_a_follower_is_ready_only_connected_and_caught_up(tmp_path: Path) -> None:
    """/readyz of a follower's writer: 503 while it is not connected to its master, or
    further behind it than `follower_ready_lag_bytes_max`; 200 once caught up.  A
    StatefulSet's roll waits on it, so the master is replaced only after its followers."""
    follower = follower_store(tmp_path / "f")
    client = ReplicationClient(follower, ReplicationSettings(
        master="127.0.0.1:9", follower_ready_lag_bytes_max=1024))

    async def readyz() -> tuple[int, str]:
        from aiohttp.test_utils import TestClient, TestServer  # noqa: PLC0415

        async with TestClient(TestServer(create_app(follower, WriterSettings(),
                                                    follower=client))) as http:
            response = await http.get("/readyz")
            return response.status, json.dumps(await response.json())

    try:
        status, body = run(readyz)
        assert status == 503 and "not connected to the master 127.0.0.1:9" in body
        client.state.connected = True
        end = follower.replication.written_position
        client.state.master_position = end + 1025
        status, body = run(readyz)
        assert status == 503 and "1025 bytes behind the master" in body
        client.state.master_position = end + 1024
        assert run(readyz)[0] == 200
    finally:
        follower.close()
