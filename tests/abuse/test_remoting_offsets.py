"""Consumer offsets through the remoting front: one store with every other front and process
(issue 22, Found 1), and bounded against a hostile client (Found 13).

Before: the front kept its own in-memory table that never re-read the group files, so a reset
made over HTTP (or by `mqstore admin groups reset`) was answered as done, the front still
answered the old offset, and its next flush wrote the old offset back over the reset; every
(group, topic) pair queried stayed in memory forever; a commit for an invalid group was
answered 0 and then logged an ERROR at every flush forever; and once `groups_max` was full a
commit was answered 0 and lost.
"""

from __future__ import annotations

import asyncio
import logging
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from tests.remoting.fronts import front_over

PEER = Peer("10.0.0.9:50000", 1)
GROUPS_MAX = 3


@pytest.fixture
def offsets(tmp_path: Path) -> ConsumerOffsets:
    return ConsumerOffsets(tmp_path, lock_timeout_ms=1000, groups_max=GROUPS_MAX)


@pytest.fixture
def front(tmp_path: Path, offsets: ConsumerOffsets) -> Iterator[Front]:
    with front_over(tmp_path, offsets=offsets) as served:
        yield served


def ask(front: Front, code: int, ext: dict[str, str]) -> Command:
    answer = asyncio.run(answer_to(front, Command(code, 11, 0, ext), PEER))
    assert answer is not None
    return answer


def commit(front: Front, group: str, offset: int, *, topic: str = "Orders",
           queue_id: int = 0) -> Command:
    return ask(front, codes.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id),
        "commitOffset": str(offset)})


def query(front: Front, group: str, *, topic: str = "Orders") -> str | None:
    answer = ask(front, codes.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": "0"})
    return answer.ext_fields.get("offset") if answer.code == codes.SUCCESS else None


def test_a_reset_made_elsewhere_is_answered_and_kept(front: Front,
                                                     offsets: ConsumerOffsets) -> None:
    assert commit(front, "billing", 10).code == codes.SUCCESS
    asyncio.run(front.offsets.flush())
    assert offsets.fetch("billing", "Orders") == {0: 10}
    assert commit(front, "billing", 12).code == codes.SUCCESS  # pending, not written yet
    offsets.commit("billing", "Orders", {0: 2}, reset=True)  # the HTTP API's reset
    asyncio.run(front.offsets.flush())
    assert offsets.fetch("billing", "Orders") == {0: 2}, "the front wrote over the reset"
    assert query(front, "billing") == "2"
    assert commit(front, "billing", 3).code == codes.SUCCESS  # the consumer goes on from it
    asyncio.run(front.offsets.flush())
    assert offsets.fetch("billing", "Orders") == {0: 3}


def test_a_commit_may_move_back_as_on_rocketmq(front: Front, offsets: ConsumerOffsets) -> None:
    """A consumer seeking back commits a lower offset: it is set, not maxed."""
    commit(front, "seeker", 50)
    asyncio.run(front.offsets.flush())
    commit(front, "seeker", 20)
    assert query(front, "seeker") == "20"
    asyncio.run(front.offsets.flush())
    assert offsets.fetch("seeker", "Orders") == {0: 20}


def test_queries_leave_nothing_behind(front: Front) -> None:
    """200,000 pairs queried grew the front by 62 MB before; here 20,000 keep under 64 KiB."""
    async def queries(prefix: str, count: int) -> None:
        for number in range(count):
            answer = await answer_to(front, Command(codes.QUERY_CONSUMER_OFFSET, 11, 0, {
                "consumerGroup": f"{prefix}{number}", "topic": f"t{number}", "queueId": "0"}),
                PEER)
            assert answer is not None
            assert answer.code == codes.SUCCESS

    async def scenario() -> int:
        await queries("warm", 1000)  # caches and code paths of the first calls
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            await queries("q", 20_000)
            return tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()

    grown_bytes = asyncio.run(scenario())
    assert grown_bytes < 64 * 1024, f"{grown_bytes} bytes kept for 20,000 queries"


def test_an_invalid_group_is_refused_with_a_remark_and_logs_nothing_after(
        front: Front, offsets: ConsumerOffsets, caplog: pytest.LogCaptureFixture) -> None:
    answer = commit(front, "bad group!", 5)
    assert answer.code == codes.SYSTEM_ERROR
    assert "illegal character" in (answer.remark or "")
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            asyncio.run(front.offsets.flush())
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert offsets.groups() == {}


def test_a_commit_past_groups_max_is_refused_not_lost(front: Front,
                                                      offsets: ConsumerOffsets) -> None:
    for number in range(GROUPS_MAX):
        assert commit(front, f"group{number}", 1).code == codes.SUCCESS
    asyncio.run(front.offsets.flush())
    refused = commit(front, "one-too-many", 1)
    assert refused.code == codes.SYSTEM_ERROR
    assert "groups_max" in (refused.remark or "")
    assert commit(front, "group0", 2).code == codes.SUCCESS  # a known group still commits
    asyncio.run(front.offsets.flush())
    assert sorted(offsets.groups()) == ["group0", "group1", "group2"]
    assert offsets.fetch("group0", "Orders") == {0: 2}


def test_pending_commits_are_bounded(tmp_path: Path, offsets: ConsumerOffsets) -> None:
    with front_over(tmp_path, offsets=offsets) as front:
        front.offsets.pending_queues_max = 4
        answers = [commit(front, "many", 1, queue_id=queue_id).code for queue_id in range(6)]
        assert answers == [codes.SUCCESS] * 4 + [codes.SYSTEM_ERROR] * 2
        asyncio.run(front.offsets.flush())
        assert commit(front, "many", 1, queue_id=5).code == codes.SUCCESS
