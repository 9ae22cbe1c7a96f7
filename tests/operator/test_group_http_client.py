"""The operator's HTTP client of a group's master against real apps: a notifier's lag summed
over every consumer group and topic (as `mqstore admin groups describe` counts it), the
permission set, a notifier that does not answer reported as unreachable, and a writer's
followers in sync."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from mqstore.operator.group_client import GroupUnreachable
from mqstore.operator.group_http_client import HttpGroupClient
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.storage import BrokerRole, Message, MessageStore, StoreConfig
from mqstore.storage.dispatch.indexer import Indexer
from tests.services.notifier_stack import notifier_app, settings
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config


def _store(store_dir: Path) -> Path:
    """Orders: 5 messages in queue 0, 3 in queue 1."""
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        for queue_id, count in ((0, 5), (1, 3)):
            for n in range(count):
                assert writer.put(Message("Orders", queue_id, f"m{n}".encode())).ok
        wait_dispatched(indexer, writer.committed_position)
    return store_dir


def test_lag_and_permission_through_the_notifiers_own_routes(tmp_path: Path) -> None:
    store_dir = _store(tmp_path / "store")
    client = HttpGroupClient(signer=None, ssl_context=None, timeout_s=5.0)

    async def scenario() -> tuple[int, int, int]:
        async with notifier_app(store_dir, settings()) as (http, _, _):
            url = str(http.make_url("")).rstrip("/")
            for group, offsets in (("behind", {"0": 2}), ("done", {"0": 5, "1": 3})):
                answer = await http.post(f"/v1/groups/{group}/offsets",
                                         json={"topic": "Orders", "offsets": offsets})
                assert answer.status == 200
            lagging = await client.lag(url)
            await http.post("/v1/groups/behind/offsets",
                            json={"topic": "Orders", "offsets": {"0": 5, "1": 3}})
            caught_up = await client.lag(url)
            await client.set_permission(url, permission=4)
            permission = (await (await http.get("/v1/broker")).json())["permission"]
            return lagging, caught_up, permission

    lagging, caught_up, permission = asyncio.run(scenario())
    assert lagging == (5 - 2) + (3 - 0), "queue 1, never committed by 'behind', counts whole"
    assert caught_up == 0
    assert permission == 4


def test_a_notifier_that_does_not_answer_is_unreachable() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    client = HttpGroupClient(signer=None, ssl_context=None, timeout_s=1.0)
    with pytest.raises(GroupUnreachable, match=r"127\.0\.0\.1"):
        asyncio.run(client.lag(f"http://127.0.0.1:{port}"))
    with pytest.raises(GroupUnreachable):
        asyncio.run(client.set_permission(f"http://127.0.0.1:{port}", permission=4))


def test_a_consumer_group_of_another_group_counts_where_it_never_committed(
        tmp_path: Path) -> None:
    """'elsewhere' committed on Orders only on a peer group's notifier (its commits to the
    drained group never arrived): on the drained group it has read nothing, so its lag is
    every message there; 'done' is caught up here and adds nothing."""
    drained = _store(tmp_path / "drained")
    peer = _store(tmp_path / "peer")
    client = HttpGroupClient(signer=None, ssl_context=None, timeout_s=5.0)

    async def scenario() -> tuple[int, int]:
        async with notifier_app(drained, settings()) as (here, _, _), \
                notifier_app(peer, settings()) as (there, _, _):
            await here.post("/v1/groups/done/offsets",
                            json={"topic": "Orders", "offsets": {"0": 5, "1": 3}})
            await there.post("/v1/groups/elsewhere/offsets",
                             json={"topic": "Orders", "offsets": {"0": 5, "1": 3}})
            url = str(here.make_url("")).rstrip("/")
            alone = await client.lag(url)
            with_peer = await client.lag(url, peers=[str(there.make_url("")).rstrip("/")])
            return alone, with_peer

    alone, with_peer = asyncio.run(scenario())
    assert alone == 0, "the drained group's own notifier knows only 'done'"
    assert with_peer == 5 + 3


def test_a_masters_followers_in_sync_from_its_writer(tmp_path: Path) -> None:
    """A sync master with no follower connected counts none (the roll waits)."""
    from aiohttp.test_utils import TestClient, TestServer  # noqa: PLC0415

    master = MessageStore.open(tmp_path / "m", StoreConfig.for_small_segments(
        64 * 1024, role=BrokerRole.SYNC_MASTER))
    client = HttpGroupClient(signer=None, ssl_context=None, timeout_s=5.0)

    async def scenario() -> dict[str, object]:
        async with TestClient(TestServer(create_app(master, WriterSettings()))) as http:
            return dict(await client.replication(str(http.make_url("")).rstrip("/")))

    try:
        answer = asyncio.run(scenario())
    finally:
        master.close()
    assert (answer["role"], answer["followers_in_sync"]) == ("sync_master", 0)
