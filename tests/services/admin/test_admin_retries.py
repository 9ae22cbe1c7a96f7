"""`mqstore admin retries` and `mqstore admin delays` against the three services: each
group's retry and dead letter topics with their message counts, the messages waiting per
delay level (config/delayOffset.json against the schedule queues), errors as one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.storage import Message
from mqstore.storage.files.delay_offsets_file import DelayOffsetsFile
from mqstore.storage.format.delay_levels import SCHEDULE_TOPIC
from tests.services.admin.deployment import Deployment, admin, deployment, until
from tests.storage.dispatch.split_helpers import wait_dispatched

WAITING_LEVEL = 3
"""Delay level 3: 10 s in the default table, queue 2 of the schedule topic."""


@pytest.fixture
def running(store_dir: Path) -> Iterator[Deployment]:
    with deployment(store_dir) as services:
        for topic, count in (("%RETRY%billing", 3), ("%DLQ%billing", 2), ("%RETRY%audit", 1),
                             ("Orders", 1)):
            for n in range(count):
                services.put(topic, 0, f"{topic} {n}".encode())
        for _ in range(4):  # as the writer stores a produce asking for level 3
            assert services.writer.put(Message(SCHEDULE_TOPIC, WAITING_LEVEL - 1, b"later",
                                               properties={"DELAY": str(WAITING_LEVEL),
                                                           "REAL_TOPIC": "Orders",
                                                           "REAL_QID": "0"})).ok
        wait_dispatched(services.indexer, services.writer.committed_position)
        DelayOffsetsFile(store_dir).write({WAITING_LEVEL: 1})  # one delivered so far
        yield services


def _retries(capsys: pytest.CaptureFixture[str], running: Deployment) -> dict[str, Any]:
    def complete() -> dict[str, Any] | None:
        document: dict[str, Any] = admin(capsys, "retries", "--output", "json",
                                         *running.options()).json()
        groups = document["groups"]
        # Every count the fixture put, not only the last topic's: the notifier learns each
        # queue's end from the indexer's notices, one topic after another.
        return document if len(groups) == 2 and groups[1]["dead_letter"] and \
            groups[1]["dead_letter"]["messages"] == 2 and \
            groups[0]["retry"]["messages"] == 1 and groups[1]["retry"]["messages"] == 3 \
            else None

    found: dict[str, Any] = until(complete)
    return found


def test_retries_shows_each_groups_retry_and_dead_letter_topics(
        running: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    document = _retries(capsys, running)
    audit, billing = document["groups"]
    assert (audit["group"], audit["retry"]["topic"], audit["retry"]["messages"],
            audit["dead_letter"]) == ("audit", "%RETRY%audit", 1, None)
    assert billing["retry"] == {"topic": "%RETRY%billing", "messages": 3, "queues": [
        {"queue_id": 0, "min_offset": 0, "max_offset": 3}]}
    assert billing["dead_letter"]["messages"] == 2
    table = admin(capsys, "retries", *running.options())
    assert table.code == 0
    lines = table.out.splitlines()
    assert lines[0].split() == ["GROUP", "RETRY_TOPIC", "RETRY_MESSAGES", "DLQ_TOPIC",
                                "DLQ_MESSAGES"]
    assert lines[1].split() == ["audit", "%RETRY%audit", "1", "-", "-"]
    assert lines[2].split() == ["billing", "%RETRY%billing", "3", "%DLQ%billing", "2"]
    assert lines[-1] == "2 group(s), 2 dead-lettered message(s)"
    one = admin(capsys, "retries", "--group", "billing", "--output", "json",
                *running.options()).json()
    assert [entry["group"] for entry in one["groups"]] == ["billing"]


def test_retries_of_a_group_without_such_topics_or_with_a_bad_name_is_one_line(
        running: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    _retries(capsys, running)
    nobody = admin(capsys, "retries", "--group", "nobody", *running.options())
    assert (nobody.code, nobody.err.count("\n")) == (2, 1)
    assert "group nobody has no retry or dead letter topic" in nobody.err
    bad = admin(capsys, "retries", "--group", "no/slash", *running.options())
    assert (bad.code, bad.err.count("\n")) == (2, 1)
    assert "answered 400 BAD_REQUEST" in bad.err


def test_delays_shows_what_waits_per_level(running: Deployment,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    def complete() -> dict[str, Any] | None:
        document: dict[str, Any] = admin(capsys, "delays", "--output", "json",
                                         *running.options()).json()
        return document if document["waiting"] == 3 else None

    document = until(complete)
    levels = {level["level"]: level for level in document["levels"]}
    assert sorted(levels) == list(range(1, 19))  # the default table's 18 levels
    assert levels[WAITING_LEVEL] == {"level": 3, "delay_ms": 10_000, "queue_id": 2,
                                     "min_offset": 0, "max_offset": 4, "next_offset": 1,
                                     "waiting": 3}
    assert levels[1]["waiting"] == 0
    table = admin(capsys, "delays", *running.options())
    lines = table.out.splitlines()
    assert lines[:2] == [f"topic {SCHEDULE_TOPIC}",
                         "LEVEL  DELAY  MAX_OFFSET  NEXT_OFFSET  WAITING"]
    assert lines[2 + WAITING_LEVEL - 1].split() == ["3", "10s", "4", "1", "3"]
    assert lines[-2].split() == ["18", "2h", "0", "0", "0"]
    assert lines[-1] == "3 message(s) waiting"


def test_delays_with_an_unreadable_progress_file_is_one_line(
        running: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    path = DelayOffsetsFile(running.store_dir).path
    path.write_text("not json")
    path.with_name(path.name + ".bak").unlink(missing_ok=True)
    broken = admin(capsys, "delays", *running.options())
    assert (broken.code, broken.err.count("\n")) == (1, 1)
    assert "answered 500 DELAY_OFFSETS_CORRUPT" in broken.err
