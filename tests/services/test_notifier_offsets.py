"""Consumer group offsets: committed through any replica, persisted, never moved backwards."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets, OffsetsLockTimeoutError
from tests.services.notifier_stack import Client, notifier_app, settings
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config


async def _commit(client: Client, group: str, offsets: dict[str, int], *,
                  reset: bool = False) -> dict[str, int]:
    response = await client.post(f"/v1/groups/{group}/offsets", json={
        "topic": "Orders", "offsets": offsets, "reset": reset})
    assert response.status == 200, await response.text()
    answer: dict[str, int] = (await response.json())["offsets"]
    return answer


async def _fetch(client: Client, group: str) -> dict[str, int]:
    response = await client.get(f"/v1/groups/{group}/offsets", params={"topic": "Orders"})
    assert response.status == 200, await response.text()
    answer: dict[str, int] = (await response.json())["offsets"]
    return answer


def test_offsets_survive_a_restart_and_a_poll_resumes_from_them(store_dir: Path) -> None:
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        for n in range(6):
            assert writer.put(Message("Orders", n % 2, f"m{n}".encode())).ok
        wait_dispatched(indexer, writer.committed_position)

    async def first_life() -> None:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            assert await _fetch(client, "billing") == {}
            assert await _commit(client, "billing", {"0": 2, "1": 1}) == {"0": 2, "1": 1}

    async def second_life() -> list[tuple[int, int]]:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            assert await _fetch(client, "billing") == {"0": 2, "1": 1}
            response = await client.post("/v1/groups/billing/topics/Orders/poll",
                                         json={"max_messages": 10})
            answer = await response.json()
            assert answer["next_offsets"] == {"0": 3, "1": 3}
            return sorted((m["queue_id"], m["queue_offset"]) for m in answer["messages"])

    run(first_life)
    document = json.loads((store_dir / "config" / "consumer-offsets" / "billing.json")
                          .read_text())
    assert document["topics"] == {"Orders": {"0": 2, "1": 1}}
    assert run(second_life) == [(0, 2), (1, 1), (1, 2)]


def test_two_replicas_never_move_an_offset_backwards(store_dir: Path) -> None:
    rng = random.Random(7)
    proposals = [{str(q): rng.randrange(1000) for q in rng.sample(range(4), 2)}
                 for _ in range(60)]

    async def scenario() -> None:
        async with notifier_app(store_dir, settings()) as (one, _, _), \
                notifier_app(store_dir, settings()) as (two, _, _):
            answers = await asyncio.gather(*(
                _commit(one if index % 2 else two, "g", proposal)
                for index, proposal in enumerate(proposals)))
            for proposal, answer in zip(proposals, answers, strict=True):
                for queue_id, offset in proposal.items():
                    assert answer[queue_id] >= offset
            highest = {}
            for proposal in proposals:
                for queue_id, offset in proposal.items():
                    highest[queue_id] = max(highest.get(queue_id, 0), offset)
            assert await _fetch(one, "g") == await _fetch(two, "g") == highest
            assert await _commit(two, "g", {"0": 0}) == highest  # stale: ignored
            moved = await _commit(one, "g", {"0": 0}, reset=True)
            assert moved["0"] == 0
            assert await _fetch(two, "g") == moved

    run(scenario)


def test_concurrent_threads_on_two_offset_stores_keep_the_maximum(store_dir: Path) -> None:
    """Commits in threads (as the notifier runs them), two stores on one directory."""
    stores = [ConsumerOffsets(store_dir, lock_timeout_ms=5000) for _ in range(2)]
    errors: list[BaseException] = []

    def commit_many(worker: int) -> None:
        try:
            for n in range(40):
                stores[worker % 2].commit("g", "T", {n % 3: worker * 1000 + n})
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=commit_many, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert stores[0].fetch("g", "T") == {0: 3039, 1: 3037, 2: 3038}


def test_a_commit_gives_up_on_a_held_lock(store_dir: Path) -> None:
    offsets = ConsumerOffsets(store_dir, lock_timeout_ms=50)
    offsets.commit("g", "T", {0: 1})
    fd = os.open(offsets.directory / "g.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(OffsetsLockTimeoutError):
            offsets.commit("g", "T", {0: 2})
    finally:
        os.close(fd)
    assert offsets.fetch("g", "T") == {0: 1}


def test_a_corrupt_offsets_file_is_named_and_left_alone(store_dir: Path) -> None:
    offsets = ConsumerOffsets(store_dir, lock_timeout_ms=1000)
    offsets.directory.mkdir(parents=True)
    offsets.path("g").write_text('{"version": 1, "topics": {"Orders": {"0": "ten"}}}')

    async def scenario() -> tuple[int, dict[str, Any], int]:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            fetched = await client.get("/v1/groups/g/offsets", params={"topic": "Orders"})
            committed = await client.post("/v1/groups/g/offsets", json={
                "topic": "Orders", "offsets": {"0": 3}})
            return fetched.status, await committed.json(), committed.status

    fetched_status, answer, committed_status = run(scenario)
    assert (fetched_status, committed_status) == (500, 500)
    assert answer["error"]["status"] == "OFFSETS_CORRUPT"
    assert "g.json" in answer["error"]["reason"]
    assert offsets.path("g").read_text() == '{"version": 1, "topics": {"Orders": {"0": "ten"}}}'


def test_groups_are_listed_with_their_topics_and_a_corrupt_file_is_500(store_dir: Path) -> None:
    async def scenario() -> None:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            assert await (await client.get("/v1/groups")).json() == {"groups": []}
            await _commit(client, "billing", {"0": 2})
            await _commit(client, "audit", {"1": 1})
            listed = await (await client.get("/v1/groups")).json()
            assert listed == {"groups": [{"group": "audit", "topics": ["Orders"]},
                                         {"group": "billing", "topics": ["Orders"]}]}
            (store_dir / "config" / "consumer-offsets" / "audit.json").write_text("{junk")
            broken = await client.get("/v1/groups")
            assert broken.status == 500
            assert (await broken.json())["error"]["status"] == "OFFSETS_CORRUPT"

    run(scenario)
