"""Slow clients of the remoting front (issue 22, findings 10 and 11).

Slowloris (11): a frame whose bytes trickle in is closed `frame_read_timeout_ms` after its
first byte (before, its body was read with no timeout: still open after three idle
timeouts), and at `connections_max` the slowest sender makes room for a new client (before,
999 slow connections refused 62 of 68 new clients).

A client that never reads (10): its pipelined pulls stop being read once
`write_buffer_bytes_max` of answers wait, the front's memory stays near that bound, the
connection is closed after `write_drain_timeout_ms` and the memory comes back (before,
1,500 pulls grew the notifier by 373 MB, and it kept them after the close).
"""

from __future__ import annotations

import asyncio
import socket
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.frame import Command, encode
from mqstore.services.notifier.remoting.service import RemotingFront
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView
from tests.abuse.http_abuse import wait_until
from tests.remoting.client import RemotingClient
from tests.services.notifier_stack import view_config
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

MESSAGES = 32
BODY_BYTES = 4096
"""A pull of all 32 answers about 130 KiB."""
PULLS = 200
"""Pipelined pulls of a client that reads nothing: 26 MiB of answers if all were kept."""
BUFFER_BYTES_MAX = 256 * 1024
MEMORY_BYTES_MAX = 2 * 1024 * 1024
"""The bound the test holds the front to: the write buffer, one answer waiting, what the
store reads cost (about 0.8 MiB measured; a front without flow control held 23 MiB here)."""
GUARD_S = 10.0


@pytest.fixture
def store_dir(tmp_path: Path) -> Iterator[Path]:
    """A store with MESSAGES messages of BODY_BYTES on Orders/0, dispatched."""
    directory = tmp_path / "store"
    with MessageStore.open(directory, writer_config()) as writer, \
            Indexer.open(directory, indexer_config()) as indexer:
        for index in range(MESSAGES):
            assert writer.put(Message("Orders", 0, bytes([index]) * BODY_BYTES)).ok
        wait_dispatched(indexer, writer.committed_position)
    yield directory


@asynccontextmanager
async def front(store_dir: Path, **settings: Any) -> AsyncIterator[RemotingFront]:
    with StoreView.open(store_dir, view_config()) as view:
        view.refresh()
        served = RemotingFront(view, ConsumerOffsets(store_dir, lock_timeout_ms=1000),
                               RemotingSettings(port=0, **settings), queue_count_max=8)
        await served.start()
        try:
            yield served
        finally:
            await served.close()


def pull(opaque: int) -> list[bytes]:
    return encode(Command(codes.PULL_MESSAGE, opaque, 0, {
        "consumerGroup": "cg", "topic": "Orders", "queueId": "0", "queueOffset": "0",
        "maxMsgNums": str(MESSAGES), "sysFlag": "4", "commitOffset": "0",
        "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
        "expressionType": "TAG"}))


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client whose kernel receive buffer is small, so unread answers stay on the front."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    raw.setblocking(False)
    await asyncio.get_running_loop().sock_connect(raw, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=raw)


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    try:
        async with asyncio.timeout(GUARD_S):
            return await reader.read() == b""
    except ConnectionError:
        return True


def test_a_frame_that_trickles_in_is_closed_at_its_deadline(store_dir: Path) -> None:
    async def scenario() -> None:
        async with front(store_dir, frame_read_timeout_ms=300) as served:
            reader, writer = await asyncio.open_connection("127.0.0.1", served.server.port)
            frame = b"".join(pull(1))
            writer.write(frame[:6])  # the length and two bytes more, then a byte at a time
            for byte in frame[6:12]:
                await asyncio.sleep(0.1)
                writer.write(bytes([byte]))
            assert await closed_by_peer(reader)  # well before idle_timeout_ms (120 s)
            writer.close()

    run(scenario)


def test_slow_senders_at_connections_max_do_not_lock_clients_out(store_dir: Path) -> None:
    async def scenario() -> None:
        async with front(store_dir, connections_max=20, frame_read_timeout_ms=5_000) as served:
            port = served.server.port
            slow: list[asyncio.StreamWriter] = []
            evicted: list[asyncio.Task[bool]] = []

            async def open_slow() -> None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"\0\0")  # half a length: a frame opened and never finished
                slow.append(writer)
                evicted.append(asyncio.create_task(closed_by_peer(reader)))

            for _ in range(40):
                await open_slow()
            await wait_until(lambda: sum(task.done() for task in evicted) == 20,
                             "the 20 oldest slow senders make room for the 20 newest")
            answered = 0
            for _ in range(10):
                client = await RemotingClient.connect(f"127.0.0.1:{port}")
                answer = await client.request(codes.GET_BROKER_CLUSTER_INFO, timeout_s=GUARD_S)
                answered += answer.code == codes.SUCCESS
                await client.close()
                await open_slow()  # the cap stays full of slow senders
            assert answered == 10
            assert served.server.connections_open <= 20
            for writer in slow:
                writer.close()
            await asyncio.gather(*evicted, return_exceptions=True)

    run(scenario)


def test_a_client_that_never_reads_costs_a_bounded_buffer_then_is_closed(
        store_dir: Path) -> None:
    async def scenario() -> tuple[int, int, int]:
        async with front(store_dir, write_buffer_bytes_max=BUFFER_BYTES_MAX,
                         write_drain_timeout_ms=1_000) as served:
            tracemalloc.start()
            try:
                before, _ = tracemalloc.get_traced_memory()
                tracemalloc.reset_peak()
                _unread, writer = await connect(served.server.port)
                for opaque in range(1, PULLS + 1):
                    writer.writelines(pull(opaque))
                await wait_until(lambda: served.server.connections_open == 1, "connected")
                await wait_until(lambda: served.server.connections_open == 0,
                                 "the front closes the connection that never drains")
                after, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            writer.close()
            return before, peak, after

    before, peak, after = run(scenario)
    assert peak - before < MEMORY_BYTES_MAX, f"{(peak - before) >> 10} KiB held"
    assert after - before < 512 * 1024, f"{(after - before) >> 10} KiB kept after the close"
