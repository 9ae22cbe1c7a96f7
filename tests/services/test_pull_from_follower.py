"""Pull and poll answers suggest a follower when the reader is far behind the log's end
(RocketMQ `suggestPullingFromSlave`, `pull_from_follower_memory_ratio`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mqstore.services.notifier.answers import behind_bytes_max, suggest_follower
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.services.notifier_stack import notifier_app, settings
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config


def write(store_dir: Path, count: int) -> None:
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        for _ in range(count):
            assert writer.put(Message("Far", 0, bytes(1000))).ok
        wait_dispatched(indexer, writer.committed_position)


def test_a_far_behind_pull_is_told_to_use_a_follower(store_dir: Path) -> None:
    write(store_dir, 20)
    ratio = 4096 / (behind_bytes_max(1.0))  # 4 KiB of this machine's memory

    async def answers(memory_ratio: float) -> list[Any]:
        async with notifier_app(store_dir, settings(
                pull_from_follower_memory_ratio=memory_ratio)) as (client, _, _):
            results = []
            for offset in (0, 18):  # ~20 KB behind the end, then the last two
                response = await client.get("/v1/topics/Far/queues/0/messages",
                                            params={"offset": str(offset), "max_messages": "2"})
                results.append((await response.json())["suggest_pull_from_follower"])
            response = await client.post("/v1/groups/g/topics/Far/poll",
                                          json={"max_messages": 1})
            results.append((await response.json())["suggest_pull_from_follower"])
            return results

    assert run(lambda: answers(ratio)) == [True, False, True]
    assert run(lambda: answers(0.4)) == [False, False, False]


def test_the_rule() -> None:
    assert suggest_follower(None, committed_position=10**9, behind_bytes_max=0) is False
    assert suggest_follower(100, committed_position=201, behind_bytes_max=100) is True
    assert suggest_follower(100, committed_position=200, behind_bytes_max=100) is False
