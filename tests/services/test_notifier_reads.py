"""The notifier's reads over HTTP: pull statuses and next offsets, group polls, lookups."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.services.notifier_stack import Client, notifier_app, settings, view_config
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config


@pytest.fixture
def written(store_dir: Path) -> list[Any]:
    """A directory nobody writes any more: 10 messages in Orders/0 (tags a, b), 3 in
    Orders/1, 2 in Audit/0; returns the stored messages in log order."""
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        for n in range(10):
            assert writer.put(Message("Orders", 0, f"o{n}".encode(), tags="ab"[n % 2],
                                      keys=[f"order-{n}"], properties={"n": str(n)})).ok
        for n in range(3):
            assert writer.put(Message("Orders", 1, f"p{n}".encode(), tags="a")).ok
        for n in range(2):
            assert writer.put(Message("Audit", 0, f"x{n}".encode())).ok
        wait_dispatched(indexer, writer.committed_position)
        return list(writer.iter_messages())


async def _get(client: Client, path: str, **params: object) -> Any:
    response = await client.get(path, params={k: str(v) for k, v in params.items()})
    assert response.status == 200, await response.text()
    return await response.json()


def _pull(**params: object) -> tuple[str, dict[str, object]]:
    return "/v1/topics/Orders/queues/0/messages", params


@pytest.mark.parametrize(("params", "status", "next_offset", "bodies"), [
    ({"offset": 0, "max_messages": 4}, "FOUND", 4, [b"o0", b"o1", b"o2", b"o3"]),
    ({"offset": 8}, "FOUND", 10, [b"o8", b"o9"]),
    ({"offset": 10}, "OFFSET_OVERFLOW_ONE", 10, []),
    ({"offset": 15}, "OFFSET_OVERFLOW_BADLY", 10, []),
    ({"offset": 0, "tags": "b"}, "FOUND", 10, [b"o1", b"o3", b"o5", b"o7", b"o9"]),
    ({"offset": 0, "tags": "zz||yy"}, "NO_MATCHED_MESSAGE", 10, []),
    ({"offset": 0, "tags": "*", "max_messages": 1}, "FOUND", 1, [b"o0"]),
])
def test_pull_statuses_and_next_offsets(store_dir: Path, written: list[Any],
                                        params: dict[str, object], status: str,
                                        next_offset: int, bodies: list[bytes]) -> None:
    async def scenario() -> None:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            answer = await _get(client, "/v1/topics/Orders/queues/0/messages", **params)
        assert (answer["status"], answer["next_offset"]) == (status, next_offset)
        assert (answer["min_offset"], answer["max_offset"]) == (0, 10)
        assert [base64.b64decode(m["body_base64"]) for m in answer["messages"]] == bodies

    run(scenario)


def test_a_pulled_message_has_every_field(store_dir: Path, written: list[Any]) -> None:
    async def scenario() -> None:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            answer = await _get(client, "/v1/topics/Orders/queues/0/messages", offset=3,
                                max_messages=1)
        stored = written[3]
        assert answer["messages"] == [{
            "topic": "Orders", "queue_id": 0, "queue_offset": 3,
            "physical_offset": stored.physical_offset, "msg_id": stored.msg_id,
            "store_timestamp_ms": stored.store_timestamp_ms,
            "born_timestamp_ms": stored.born_timestamp_ms, "reconsume_times": 0, "tags": "b",
            "keys": ["order-3"],
            "properties": {key: value for key, value in stored.properties.items()
                           if key not in ("TAGS", "KEYS")},
            "body_base64": base64.b64encode(b"o3").decode()}]
        assert answer["messages"][0]["properties"]["n"] == "3"

    run(scenario)


def test_an_unknown_queue_has_no_message(store_dir: Path, written: list[Any]) -> None:
    async def scenario() -> None:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            answer = await _get(client, "/v1/topics/Nothing/queues/7/messages", offset=0)
        assert (answer["status"], answer["next_offset"], answer["messages"]) == \
            ("NO_MESSAGE_IN_QUEUE", 0, [])

    run(scenario)


def test_a_group_poll_takes_queues_round_robin(store_dir: Path, written: list[Any]) -> None:
    async def scenario() -> list[list[tuple[int, int]]]:
        rounds = []
        async with notifier_app(store_dir, settings(group_poll_queue_share_min=1)) as (
                client, _, _):
            for _ in range(2):
                response = await client.post("/v1/groups/g/topics/Orders/poll",
                                             json={"max_messages": 4})
                answer = await response.json()
                rounds.append([(m["queue_id"], m["queue_offset"]) for m in answer["messages"]])
            everything = await client.post("/v1/groups/g/topics/Orders/poll",
                                           json={"max_messages": 100})
            answer = await everything.json()
            assert answer["next_offsets"] == {"0": 10, "1": 3}
            assert len(answer["messages"]) == 13
            moved = await client.post("/v1/groups/g/topics/Orders/poll", json={
                "max_messages": 100, "offsets": {"0": 9}})
            answer = await moved.json()
            assert sorted((m["queue_id"], m["queue_offset"]) for m in answer["messages"]) \
                == [(0, 9), (1, 0), (1, 1), (1, 2)]
        return rounds

    rounds = run(scenario)
    for taken in rounds:  # a share of 2 from each queue, whichever queue comes first
        assert sorted(taken) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert rounds[0][0][0] != rounds[1][0][0]  # the starting queue rotates


def test_a_group_poll_reads_at_least_the_share_min_and_the_next_goes_on(
        store_dir: Path, written: list[Any]) -> None:
    """A share of at least 3 with room for 3: a poll reads one whole queue, and the next
    poll of the topic starts at the queue after it (same positions given each time)."""
    async def scenario() -> list[list[tuple[int, int]]]:
        rounds = []
        async with notifier_app(store_dir, settings(group_poll_queue_share_min=3)) as (
                client, _, _):
            for _ in range(3):
                response = await client.post("/v1/groups/g/topics/Orders/poll", json={
                    "max_messages": 3, "offsets": {"0": 0, "1": 0}})
                answer = await response.json()
                rounds.append([(m["queue_id"], m["queue_offset"]) for m in answer["messages"]])
        return rounds

    first, second, third = run(scenario)
    assert first == [(0, 0), (0, 1), (0, 2)]
    assert second == [(1, 0), (1, 1), (1, 2)]
    assert third == first


def test_lookups_by_key_time_position_and_listings(store_dir: Path,
                                                   written: list[Any]) -> None:
    async def scenario() -> None:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            by_key = await _get(client, "/v1/topics/Orders/messages", key="order-6")
            assert [m["queue_offset"] for m in by_key["messages"]] == [6]
            assert (await _get(client, "/v1/topics/Audit/messages", key="order-6"))[
                "messages"] == []
            seventh = written[7]
            at = await _get(client, f"/v1/messages/{seventh.physical_offset}")
            assert (at["topic"], at["queue_offset"], base64.b64decode(at["body_base64"])) == \
                ("Orders", 7, b"o7")
            missing = await client.get(f"/v1/messages/{seventh.physical_offset + 1}")
            assert missing.status == 404
            assert (await missing.json())["error"]["status"] == "NOT_FOUND"
            by_time = await _get(client, "/v1/topics/Orders/queues/0/offset-by-time",
                                 timestamp_ms=seventh.store_timestamp_ms)
            assert by_time["offset"] <= 7
            assert written[by_time["offset"]].store_timestamp_ms == \
                seventh.store_timestamp_ms
            late = await _get(client, "/v1/topics/Orders/queues/0/offset-by-time",
                              timestamp_ms=seventh.store_timestamp_ms + 10**9)
            assert late["offset"] == 10
            assert await _get(client, "/v1/topics") == {"topics": ["Audit", "Orders"]}
            assert await _get(client, "/v1/topics/Orders/queues") == {"topic": "Orders",
                                                                      "queues": [
                {"queue_id": 0, "min_offset": 0, "max_offset": 10},
                {"queue_id": 1, "min_offset": 0, "max_offset": 3}]}

    run(scenario)


def test_openapi_documents_every_route(store_dir: Path) -> None:
    async def scenario() -> None:
        async with notifier_app(store_dir, settings()) as (client, app, _):
            document = await (await client.get("/openapi.json")).json()
            routes = {(route.method.lower(), route.resource.canonical)
                      for route in app.router.routes() if route.resource is not None}
        documented = {(method, path) for path, item in document["paths"].items()
                      for method in item}
        assert routes == documented

    run(scenario)


def test_lookups_by_key_need_the_index(store_dir: Path, written: list[Any]) -> None:
    async def scenario() -> tuple[int, dict[str, Any]]:
        async with notifier_app(store_dir, settings(),
                                config=view_config(index_enabled=False)) as (client, _, _):
            response = await client.get("/v1/topics/Orders/messages", params={"key": "k"})
            return response.status, await response.json()

    status, answer = run(scenario)
    assert status == 501
    assert answer["error"]["status"] == "INDEX_DISABLED"
