"""Issue 22, item 15b: `remoting.held_pulls_per_client_max` counts one client's held pulls,
and a client is its connection, not its source address.

Clients behind one address (a NAT, a node's SNAT, a sidecar proxy that makes every client
127.0.0.1) are separate clients: each gets the cap.  A RocketMQ client instance keeps one
connection per broker for all its consumers, so the connection is the client; its
heartbeat's client id is not used, because a client chooses it and could name another's.
No per-address bound is kept: `held_pulls_max` already bounds the whole table, and one
address may open up to `connections_max` connections anyway.

Held pulls are answered by `front.held.close()` at the end; nothing waits 20 s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.services.notifier.remoting.service import RemotingFront
from mqstore.storage import StoreConfig
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView

PULL = {"consumerGroup": "cg", "topic": "TBW102", "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0",
        "suspendTimeoutMillis": "20000", "subVersion": "0"}
FIRST = Peer("10.0.0.7:40001", 1)
SECOND = Peer("10.0.0.7:40002", 2)
"""Another client on the same address."""


@pytest.fixture
def front(tmp_path: Path) -> Iterator[Front]:
    view = StoreView.open(tmp_path, StoreConfig())
    try:
        yield RemotingFront(view, ConsumerOffsets(tmp_path, lock_timeout_ms=1000),
                            RemotingSettings(port=0, held_pulls_max=10,
                                             held_pulls_per_client_max=1),
                            queue_count_max=8).front
    finally:
        view.close()


async def hold(front: Front, peer: Peer, opaque: int) -> asyncio.Future[Command | None]:
    """Start a pull that holds; returns it once it is held (or already answered)."""
    held_before = front.held.held_count
    pull = asyncio.ensure_future(answer_to(front, Command(11, opaque, 0, PULL), peer))
    while front.held.held_count == held_before and not pull.done():
        await asyncio.sleep(0)
    return pull


def test_clients_behind_one_address_each_get_the_cap(front: Front) -> None:
    async def pulls() -> tuple[Command | None, Command | None, int]:
        first = await hold(front, FIRST, 1)
        second = await hold(front, SECOND, 2)
        held = front.held.held_count
        front.held.close()
        return (second.result() if second.done() and held < 2 else None,
                await first, held)

    early, first, held = asyncio.run(pulls())
    assert early is None, (early.code, early.remark)  # not SYSTEM_BUSY at once
    assert held == 2
    assert first is not None


def test_one_connection_is_still_capped(front: Front) -> None:
    async def pulls() -> Command | None:
        first = await hold(front, FIRST, 1)
        second = await hold(front, FIRST, 2)
        assert second.done()
        front.held.close()
        await first
        return second.result()

    second = asyncio.run(pulls())
    assert second is not None
    assert second.code == codes.SYSTEM_BUSY
    assert "this client holds 1 pulls already" in (second.remark or "")
