"""Heartbeats against a hostile or busy client (issue 22, Found 12).

Before: one heartbeat naming 20,000 groups blocked the notifier for seconds (every changed
group scanned every client twice); 100 membership flips pushed NOTIFY_CONSUMER_IDS_CHANGED
once per member per flip; and one connection could fill the client table, so a legitimate
consumer was refused with the flood.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from tests.abuse.remoting_live import serving
from tests.remoting.client import heartbeat

SETTINGS = RemotingSettings(port=0)
HEARTBEAT_S_MAX = 0.1
"""A heartbeat of `heartbeat_groups_max` groups among thousands of clients: about 10 ms
(before: 0.26 s among 3,000 clients, 0.87 s among 10,000)."""
REFUSAL_S_MAX = 0.5
"""A heartbeat of 20,000 groups (4 MB of JSON), refused: about 0.15 s, all of it parsing
(before: 2.9 s among 2,000 clients, 36 s among 10,000)."""


def _groups_body(client_id: str, groups: list[str]) -> bytes:
    return json.dumps({"clientID": client_id, "producerDataSet": [], "consumerDataSet": [
        {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
         "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
         "subscriptionDataSet": [{"topic": "t", "subString": "*", "subVersion": 1}]}
        for group in groups]}).encode()


async def _beat(front: Front, body: bytes, connection_id: int) -> Command:
    answer = await answer_to(front, Command(codes.HEART_BEAT, 7, 0, {}, body),
                             Peer(f"127.0.0.1:{connection_id}", connection_id))
    assert answer is not None
    return answer


def _run(tmp_path: Path, settings: RemotingSettings,
         scenario: Callable[[Front], Awaitable[None]]) -> None:
    async def run() -> None:
        async with serving(tmp_path, settings) as served:
            await scenario(served.front)

    asyncio.run(run())


def test_a_heartbeat_past_heartbeat_groups_max_is_refused_at_once(tmp_path: Path) -> None:
    async def scenario(front: Front) -> None:
        for index in range(2000):
            await _beat(front, heartbeat(f"c{index}", "cg", "t"), index + 1)
        groups = [f"g{index}" for index in range(20_000)]
        body = _groups_body("big", groups)
        started = time.perf_counter()
        answer = await _beat(front, body, 9999)
        elapsed_s = time.perf_counter() - started
        assert answer.code == codes.SYSTEM_ERROR
        assert "heartbeat_groups_max" in (answer.remark or "")
        assert front.clients.consumers("g0") == []
        assert elapsed_s < REFUSAL_S_MAX

    _run(tmp_path, SETTINGS, scenario)


def test_a_max_size_heartbeat_costs_what_changed_not_the_table(tmp_path: Path) -> None:
    async def scenario(front: Front) -> None:
        for index in range(3000):
            await _beat(front, heartbeat(f"c{index}", f"cg{index % 50}", "t"), index + 1)
        body = _groups_body("big", [f"g{index}" for index in range(
            SETTINGS.heartbeat_groups_max)])
        for attempt in ("join", "renew"):
            started = time.perf_counter()
            answer = await _beat(front, body, 9999)
            elapsed_s = time.perf_counter() - started
            assert answer.code == codes.SUCCESS, attempt
            assert elapsed_s < HEARTBEAT_S_MAX, attempt
        assert [entry.client_id for entry in front.clients.consumers("g999")] == ["big"]

    _run(tmp_path, SETTINGS, scenario)


def test_membership_flips_are_coalesced_into_one_push_per_window(tmp_path: Path) -> None:
    members = 100
    window_s = SETTINGS.notify_debounce_ms / 1000

    async def scenario(front: Front) -> None:
        pushed: list[int] = []

        def push(connection_id: int, command: Command) -> bool:
            if command.ext_fields == {"consumerGroup": "cg"}:
                pushed.append(connection_id)
            return True

        front.push = push
        for index in range(members):
            await _beat(front, heartbeat(f"c{index}", "cg", "t"), index + 1)
        await asyncio.sleep(window_s * 2.5)  # the joins' own rounds are done, and forgotten
        pushed.clear()
        for flip in range(100):  # "flip" joins and leaves the group, 50 times each
            body = heartbeat("flip", "cg" if flip % 2 == 0 else "other", "t")
            assert (await _beat(front, body, 5000)).code == codes.SUCCESS
        assert len(pushed) == members + 1  # the first flip, told at once
        await asyncio.sleep(window_s * 1.5)
        assert len(pushed) == 2 * members + 1  # one more round, after the window: "flip" left
        assert sorted(pushed[members + 1:]) == list(range(1, members + 1))

    _run(tmp_path, SETTINGS, scenario)


def test_a_flood_on_one_connection_cannot_crowd_out_a_consumer(tmp_path: Path) -> None:
    settings = RemotingSettings(port=0, clients_max=50)

    async def scenario(front: Front) -> None:
        answers = [(await _beat(front, heartbeat(f"fake{index}", f"g{index}", "t"), 1)).code
                   for index in range(100)]
        per_connection = settings.clients_per_connection_max
        assert answers == [codes.SUCCESS] * per_connection + [codes.SYSTEM_BUSY] * (
            100 - per_connection)
        refused = await _beat(front, heartbeat("fake-more", "g", "t"), 1)
        assert "clients_per_connection_max" in (refused.remark or "")
        assert (await _beat(front, heartbeat("consumer", "cg", "t"), 2)).code == codes.SUCCESS

    _run(tmp_path, settings, scenario)


def test_a_full_table_refuses_only_a_new_client(tmp_path: Path) -> None:
    settings = RemotingSettings(port=0, clients_max=20)

    async def scenario(front: Front) -> None:
        for index in range(20):
            assert (await _beat(front, heartbeat(f"c{index}", "cg", "t"), index + 1)
                    ).code == codes.SUCCESS
        new = await _beat(front, heartbeat("new", "cg", "t"), 100)
        assert (new.code, "clients_max" in (new.remark or "")) == (codes.SYSTEM_BUSY, True)
        renewed = await _beat(front, heartbeat("c0", "cg", "t"), 1)
        moved = await _beat(front, heartbeat("c1", "other", "t"), 101)  # reconnected
        assert (renewed.code, moved.code) == (codes.SUCCESS, codes.SUCCESS)
        assert len(front.clients.consumers("cg")) == 19
        assert [entry.client_id for entry in front.clients.consumers("other")] == ["c1"]
        front.clients.connection_closed(2)  # c1 moved away: its old connection holds none
        assert len(front.clients.consumers("other")) == 1

    _run(tmp_path, settings, scenario)
