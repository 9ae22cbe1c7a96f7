"""Bad requests get a 4xx with a reason naming the problem, and change nothing on disk."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

from mqstore.services.notifier.app import HELD
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.services.notifier_stack import metric, notifier_app, settings, wait_until
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

PULL = "/v1/topics/Orders/queues/0/messages"
POLL = "/v1/groups/g/topics/Orders/poll"
COMMIT = "/v1/groups/g/offsets"
JSON = {"Content-Type": "application/json"}

CASES: list[tuple[str, str, dict[str, str] | None, Any, int, str]] = [
    # method, path, query, body (bytes = raw JSON text), HTTP status, part of the reason
    ("GET", PULL, {"offset": "-1"}, None, 400, "offset must be an integer >= 0"),
    ("GET", PULL, {"offset": "12abc"}, None, 400, "offset must be an integer"),
    ("GET", PULL, {"offset": "1.5"}, None, 400, "offset must be an integer"),
    ("GET", PULL, {}, None, 400, "offset is required"),
    ("GET", PULL, {"offset": "0", "max_messages": "0"}, None, 400, "max_messages"),
    ("GET", PULL, {"offset": "0", "max_messages": "100000"}, None, 400, "pull_messages_max"),
    ("GET", PULL, {"offset": "0", "wait_ms": "-5"}, None, 400, "wait_ms"),
    ("GET", PULL, {"offset": "0", "wait_ms": "3600000"}, None, 400, "pull_wait_ms_max"),
    ("GET", PULL, {"offset": "0", "tags": "a||"}, None, 400, "non-empty tags"),
    ("GET", "/v1/topics/Orders/queues/x/messages", {"offset": "0"}, None, 400, "queue_id"),
    ("GET", "/v1/topics/Orders/queues/-1/messages", {"offset": "0"}, None, 400, "queue_id"),
    ("GET", "/v1/topics/Orders/queues/99999999999/messages", {"offset": "0"}, None, 400,
     "over the maximum"),
    ("GET", "/v1/topics/bad.topic/queues/0/messages", {"offset": "0"}, None, 400,
     "illegal character '.'"),
    ("GET", "/v1/topics/" + "T" * 200 + "/queues/0/messages", {"offset": "0"}, None, 400,
     "topic_size_bytes_max"),
    ("POST", POLL, None, b"{not json", 400, "not valid JSON"),
    ("POST", POLL, None, b"[1, 2]", 400, "must be a JSON object"),
    ("POST", POLL, None, {"wait": 5}, 400, "unknown field(s) ['wait']"),
    ("POST", POLL, None, {"max_messages": "5"}, 400, "max_messages must be an integer"),
    ("POST", POLL, None, {"offsets": {"x": 1}}, 400, "offsets key"),
    ("POST", POLL, None, {"offsets": {"0": -1}}, 400, "must be an integer >= 0"),
    ("POST", POLL, None, {"tags": 7}, 400, "tags must be"),
    ("POST", "/v1/groups/bad%20group/topics/Orders/poll", None, {}, 400,
     "illegal character(s) [' ']"),
    ("POST", "/v1/groups/" + "g" * 241 + "/topics/Orders/poll", None, {}, 400,
     "maximum is 240"),
    ("POST", COMMIT, None, b"\xff\xfe", 400, "not UTF-8"),
    ("POST", COMMIT, None, {"offsets": {"0": 1}}, 400, "topic is required"),
    ("POST", COMMIT, None, {"topic": "Orders"}, 400, "offsets is required"),
    ("POST", COMMIT, None, {"topic": "Orders", "offsets": [1]}, 400, "must be an object"),
    ("POST", COMMIT, None, {"topic": "Orders", "offsets": {"0": -3}}, 400, ">= 0"),
    ("POST", COMMIT, None, {"topic": "Orders", "offsets": {"0": True}}, 400,
     "must be an integer"),
    ("POST", COMMIT, None, {"topic": "Or/ders", "offsets": {"0": 1}}, 400,
     "illegal character '/'"),
    ("POST", COMMIT, None, {"topic": "Orders", "offsets": {"0": 1}, "reset": "yes"}, 400,
     "reset must be true or false"),
    ("GET", COMMIT, {}, None, 400, "the topic query parameter is required"),
    ("GET", COMMIT, {"topic": ""}, None, 400, "topic is empty"),
    ("GET", "/v1/topics/Orders/messages", {}, None, 400, "key is required"),
    ("GET", "/v1/topics/Orders/messages", {"key": "k", "begin_ms": "-1"}, None, 400,
     "begin_ms"),
    ("GET", "/v1/topics/Orders/queues/0/offset-by-time", {}, None, 400,
     "timestamp_ms is required"),
    ("GET", "/v1/messages/-5", None, None, 400, "physical_offset"),
    ("GET", "/v1/messages/abc", None, None, 400, "physical_offset"),
]


def _tree(directory: Path) -> dict[str, str]:
    return {str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.rglob("*")) if path.is_file()}


@pytest.fixture
def quiet_store(store_dir: Path) -> Path:
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        for n in range(5):
            assert writer.put(Message("Orders", 0, f"m{n}".encode(), keys=[f"k{n}"])).ok
        wait_dispatched(indexer, writer.committed_position)
    return store_dir


def test_bad_requests_get_a_reason_and_change_nothing(quiet_store: Path) -> None:
    before = _tree(quiet_store)

    async def scenario() -> list[str]:
        problems = []
        async with notifier_app(quiet_store, settings()) as (client, _, _):
            for method, path, query, body, http_status, reason in CASES:
                data = body if isinstance(body, bytes) or body is None else None
                response = await client.request(method, path, params=query, data=data,
                                                json=None if data is not None else body,
                                                headers=JSON if data is not None else None)
                answer = await response.json()
                if response.status != http_status or reason not in answer["error"]["reason"]:
                    problems.append(f"{method} {path[:60]} {query} {body!r:.40}: "
                                    f"{response.status} {answer}")
        return problems

    assert run(scenario) == []
    assert _tree(quiet_store) == before
    assert not (quiet_store / "config").exists()


def test_a_body_that_is_not_json_is_415(quiet_store: Path) -> None:
    async def scenario() -> tuple[int, dict[str, Any]]:
        async with notifier_app(quiet_store, settings()) as (client, _, _):
            response = await client.post(POLL, data=b"max_messages=3",
                                          headers={"Content-Type": "text/plain"})
            return response.status, await response.json()

    status, answer = run(scenario)
    assert status == 415
    assert answer["error"]["status"] == "UNSUPPORTED_MEDIA_TYPE"


def test_beyond_held_requests_max_a_waiting_pull_gets_503(quiet_store: Path) -> None:
    async def scenario() -> None:
        async with notifier_app(quiet_store, settings(held_requests_max=1)) as (
                client, app, _):
            held = asyncio.create_task(client.get(PULL, params={"offset": "5",
                                                                "wait_ms": "30000"}))
            await wait_until(lambda: app[HELD].held_count == 1)
            refused = await client.get(PULL, params={"offset": "5", "wait_ms": "1000"})
            assert refused.status == 503
            assert refused.headers["Retry-After"] == "1"
            assert "held_requests_max=1" in (await refused.json())["error"]["reason"]
            found = await client.get(PULL, params={"offset": "0", "wait_ms": "1000"})
            assert found.status == 200  # it has data: it never waits
            assert await metric(client, "mqstore_pull_requests_total", endpoint="pull",
                                status="HTTP_503") == 1
            held.cancel()

    run(scenario)
