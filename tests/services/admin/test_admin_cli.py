"""`mqstore admin` against the three services on 127.0.0.1: topics, groups (lag, reset),
messages, status; tables and JSON; errors as one line (issue 18, Found 1)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.client import Consumer, Producer
from tests.services.admin.deployment import Deployment, admin, deployment, until


@pytest.fixture
def running(store_dir: Path) -> Iterator[Deployment]:
    with deployment(store_dir) as services:
        for n in range(10):
            services.put("Orders", n % 4, f"order {n}".encode(), keys=(f"order-{n}",))
        yield services


def _described(capsys: pytest.CaptureFixture[str], running: Deployment,
               topic: str) -> dict[str, Any]:
    """The topic's description once the notifier sees the fixture's 10 messages."""
    def complete() -> dict[str, Any] | None:
        described: dict[str, Any] = admin(capsys, "topics", "describe", topic, "--output",
                                          "json", *running.options()).json()
        return described if described["message_count"] == 10 else None

    found: dict[str, Any] = until(complete)
    return found


def test_topics_are_listed_described_created_and_deleted(
        running: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    options = running.options()
    described = _described(capsys, running, "Orders")
    assert [(q["queue_id"], q["min_offset"], q["max_offset"]) for q in described["queues"]] \
        == [(0, 0, 3), (1, 0, 3), (2, 0, 2), (3, 0, 2)]
    table = admin(capsys, "topics", "describe", "Orders", *options)
    assert table.code == 0
    lines = table.out.splitlines()
    assert lines[:2] == ["topic Orders", "QUEUE  MIN_OFFSET  MAX_OFFSET  MESSAGES"]
    assert lines[2].split() == ["0", "0", "3", "3"]
    assert lines[-1] == "4 queue(s), 10 message(s)"

    created = admin(capsys, "topics", "create", "Fresh", "--queues", "2", *options)
    assert (created.code, created.out) == (0, "created topic Fresh with 2 queue(s)\n")
    topics_file = json.loads((running.store_dir / "config" / "topics.json").read_text())
    assert topics_file["topicConfigTable"]["Fresh"]["writeQueueNums"] == 2
    with Producer(running.urls["writer"]) as producer:  # no queue named: the writer picks
        assert {producer.send("Fresh", b"f").queue_id for _ in range(6)} == {0, 1}
    until(lambda: admin(capsys, "topics", "describe", "Fresh", "--output", "json",
                        *options).json()["message_count"] == 6)
    assert admin(capsys, "topics", "list", "--output", "json", *options).json() == {
        "topics": ["Fresh", "Orders"]}
    assert admin(capsys, "topics", "list", *options).out.split() == ["TOPIC", "Fresh",
                                                                     "Orders"]

    too_many = admin(capsys, "topics", "create", "Big", "--queues", "99", *options)
    assert too_many.code == 2
    assert too_many.err.count("\n") == 1
    assert "answered 400 BAD_REQUEST: queue_count=99 is over the maximum 8" in too_many.err

    assert admin(capsys, "topics", "delete", "Fresh", "--output", "json", *options).json() \
        == {"topic": "Fresh", "deleted": True}
    assert "Fresh" not in admin(capsys, "topics", "list", *options).out
    again = admin(capsys, "topics", "delete", "Fresh", *options)
    assert again.code == 2
    assert again.err.startswith("mqstore admin: DELETE ")
    assert "404 TOPIC_NOT_EXIST: topic Fresh does not exist" in again.err
    unknown = admin(capsys, "topics", "describe", "Nobody", *options)
    assert (unknown.code, unknown.out) == (2, "")
    assert "topic Nobody does not exist" in unknown.err


def test_groups_show_lag_and_are_reset_to_an_offset_or_a_time(
        running: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    options = running.options()
    _described(capsys, running, "Orders")
    with Consumer(running.urls["notifier"], "billing", "Orders") as consumer:
        got = []
        while len(got) < 10:
            got += consumer.poll(max_messages=10, wait_ms=500)
        consumer.commit()
    assert admin(capsys, "groups", "list", "--output", "json", *options).json() == {
        "groups": [{"group": "billing", "topics": ["Orders"]}]}
    assert admin(capsys, "groups", "list", *options).out.split() == [
        "GROUP", "TOPICS", "billing", "Orders"]
    running.put("Orders", 1, b"late")
    until(lambda: admin(capsys, "groups", "describe", "billing", "--output", "json",
                        *options).json()["lag"] == 1)
    table = admin(capsys, "groups", "describe", "billing", *options).out.splitlines()
    assert table[1].split() == ["TOPIC", "QUEUE", "COMMITTED_OFFSET", "MAX_OFFSET", "LAG"]
    assert [line.split() for line in table[2:6]] == [
        ["Orders", "0", "3", "3", "0"], ["Orders", "1", "3", "4", "1"],
        ["Orders", "2", "2", "2", "0"], ["Orders", "3", "2", "2", "0"]]
    assert table[-1] == "total lag 1"

    reset = admin(capsys, "groups", "reset", "billing", "--topic", "Orders", "--offset", "1",
                  "--output", "json", *options).json()
    assert reset["offsets"] == {"0": 1, "1": 1, "2": 1, "3": 1}
    assert reset["previous_offsets"] == {"0": 3, "1": 3, "2": 2, "3": 2}
    described = admin(capsys, "groups", "describe", "billing", "--topic", "Orders",
                      "--output", "json", *options).json()
    assert described["lag"] == 11 - 4
    with Consumer(running.urls["notifier"], "billing", "Orders") as consumer:
        assert sorted(m.queue_offset for m in consumer.poll(max_messages=32, wait_ms=0)
                      if m.queue_id == 0) == [1, 2]

    late = admin(capsys, "groups", "reset", "billing", "--topic", "Orders",
                 "--time", "2999-01-01T00:00:00Z", *options)
    assert late.code == 0, late.err
    assert late.out.splitlines()[-1] == "reset 4 queue(s) of Orders for group billing"
    assert admin(capsys, "groups", "describe", "billing", "--output", "json",
                 *options).json()["lag"] == 0
    early = admin(capsys, "groups", "reset", "billing", "--topic", "Orders", "--queue", "2",
                  "--timestamp-ms", "0", "--output", "json", *options).json()
    assert early["offsets"] == {"0": 3, "1": 4, "2": 0, "3": 2}

    nobody = admin(capsys, "groups", "describe", "nobody", *options)
    assert nobody.code == 2
    assert "group nobody has no committed offsets" in nobody.err
    no_target = admin(capsys, "groups", "reset", "billing", "--topic", "Orders", *options)
    assert no_target.code == 2  # argparse: one of --offset, --time, --timestamp-ms


def test_messages_are_found_by_key_msg_id_and_queue_offset(
        running: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    options = running.options()
    _described(capsys, running, "Orders")
    by_key = admin(capsys, "messages", "key", "Orders", "order-6", "--output", "json",
                   *options).json()
    [message] = by_key["messages"]
    assert (message["queue_id"], message["queue_offset"]) == (2, 1)
    by_id = admin(capsys, "messages", "id", message["msg_id"], "--output", "json",
                  *options).json()
    assert by_id["physical_offset"] == message["physical_offset"]
    table = admin(capsys, "messages", "offset", "Orders", "2", "1", *options).out.splitlines()
    assert table[0].split() == ["TOPIC", "QUEUE", "OFFSET", "MSG_ID", "STORED", "TAGS",
                                "KEYS", "BODY"]
    row = table[1].split()
    assert row[:4] == ["Orders", "2", "1", message["msg_id"]]
    assert row[-3:] == ["order-6", "order", "6"]

    past_end = admin(capsys, "messages", "offset", "Orders", "2", "7", *options)
    assert past_end.code == 2
    assert "no message at Orders/2 offset 7: OFFSET_OVERFLOW_BADLY" in past_end.err
    bad_id = admin(capsys, "messages", "id", "xyz", *options)
    assert (bad_id.code, bad_id.err.count("\n")) == (2, 1)
    assert "not a msg id" in bad_id.err
    nothing_there = admin(capsys, "messages", "id", "7F000001000022B8" + "0" * 15 + "1",
                          *options)
    assert nothing_there.code == 2
    assert "404 NOT_FOUND" in nothing_there.err


def test_status_shows_each_service_and_a_dead_one_is_one_line(
        running: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    options = running.options()
    status = admin(capsys, "status", "--output", "json", *options).json()
    assert status["ready"] is True
    assert status["services"]["writer"]["status"]["role"] == "async_master"
    assert status["services"]["indexer"]["status"]["failure"] is None
    table = admin(capsys, "status", *options).out.splitlines()
    assert [line.split()[:3] for line in table[1:]] == [
        ["writer", running.urls["writer"], "yes"], ["indexer", running.urls["indexer"], "yes"],
        ["notifier", running.urls["notifier"], "yes"]]

    dead = "http://127.0.0.1:9"  # discard: nothing listens there
    unreachable = admin(capsys, "topics", "list", "--url", dead)
    assert unreachable.code == 1
    assert unreachable.err == f"mqstore admin: {dead} does not answer: Connection refused\n"
    partly = admin(capsys, "status", *options[:4], "--indexer-url", dead)
    assert partly.code == 1
    assert "NO" in partly.out.splitlines()[2]
    not_a_url = admin(capsys, "topics", "list", "--url", "not-a-url")
    assert (not_a_url.code, not_a_url.err.count("\n")) == (2, 1)


def test_with_a_users_file_the_commands_sign_with_the_keys_given(
        store_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    users_file = tmp_path / "plain_acl.yml"
    users_file.write_text("accounts:\n  - {accessKey: operator, secretKey: operator-secret, "
                          "admin: true}\n")
    with deployment(store_dir, users_file=users_file) as running:
        options = running.options()
        unsigned = admin(capsys, "topics", "create", "Audit", *options)
        assert unsigned.code == 2
        assert "answered 401 UNAUTHORIZED" in unsigned.err
        wrong = admin(capsys, "groups", "list", "--access-key", "operator", "--secret-key",
                      "guess", *options)
        assert (wrong.code, wrong.err.count("\n")) == (2, 1)
        half = admin(capsys, "topics", "list", "--access-key", "operator", *options)
        assert (half.code, "give both --access-key and --secret-key") == (
            2, half.err.split(": ", 1)[1][:39])
        monkeypatch.setenv("MQSTORE_ACCESS_KEY", "operator")
        monkeypatch.setenv("MQSTORE_SECRET_KEY", "operator-secret")
        assert admin(capsys, "topics", "create", "Audit", *options).code == 0
        assert admin(capsys, "groups", "list", "--output", "json", *options).json() == {
            "groups": []}
        assert admin(capsys, "status", "--output", "json", *options).json()["ready"]
