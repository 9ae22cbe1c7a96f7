"""`mqstore admin transactions` against the three services: the half, op and discarded
topics with their message counts, the check's progress (group CID_RMQ_SYS_TRANS's offsets
file, the notifier serving no remoting front) and the halves past it; errors as one line
(services/admin/retries.py, services/notifier/transaction_status.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.services.common.topics.rules import TRANSACTION_HALF_TOPIC, TRANSACTION_OP_TOPIC
from mqstore.storage import Message
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from tests.services.admin.deployment import Deployment, admin, deployment, until
from tests.storage.dispatch.split_helpers import wait_dispatched

CHECK_GROUP = "CID_RMQ_SYS_TRANS"
HALVES = 5
CHECKED = 2
"""The check's progress on the half queue: halves 0 and 1 are behind it."""


@pytest.fixture
def running(store_dir: Path) -> Iterator[Deployment]:
    with deployment(store_dir) as services:
        for n in range(HALVES):  # as the writer stores a half the front routed
            assert services.writer.put(Message(
                TRANSACTION_HALF_TOPIC, 0, f"half {n}".encode(),
                properties={"REAL_TOPIC": "Orders", "REAL_QID": "0", "PGROUP": "pay"})).ok
        assert services.writer.put(Message(TRANSACTION_OP_TOPIC, 0, b"0,",
                                           properties={"TAGS": "d"})).ok
        wait_dispatched(services.indexer, services.writer.committed_position)
        offsets = ConsumerOffsets(store_dir, lock_timeout_ms=1000)
        offsets.commit(CHECK_GROUP, TRANSACTION_HALF_TOPIC, {0: CHECKED})
        offsets.commit(CHECK_GROUP, TRANSACTION_OP_TOPIC, {0: 1})
        yield services


def _transactions(capsys: pytest.CaptureFixture[str], running: Deployment) -> dict[str, Any]:
    def complete() -> dict[str, Any] | None:
        document: dict[str, Any] = admin(capsys, "transactions", "--output", "json",
                                         *running.options()).json()
        return document if document["op_topic"] is not None and \
            document["half_topic"]["messages"] == HALVES else None

    found: dict[str, Any] = until(complete)
    return found


def test_transactions_shows_the_topics_and_the_checks_progress(
        running: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    document = _transactions(capsys, running)
    assert document["half_topic"] == {"topic": TRANSACTION_HALF_TOPIC, "messages": HALVES,
                                      "queues": [{"queue_id": 0, "min_offset": 0,
                                                  "max_offset": HALVES}]}
    assert document["op_topic"]["messages"] == 1
    assert document["discarded_topic"] is None
    assert document["check"] == {"group": CHECK_GROUP, "half_offset": CHECKED,
                                 "op_offset": 1, "pending": HALVES - CHECKED}
    assert document["last_pass"] is None  # no remoting front: no pass to report
    table = admin(capsys, "transactions", *running.options())
    assert table.code == 0
    lines = table.out.splitlines()
    assert lines[0].split() == ["KIND", "TOPIC", "MESSAGES"]
    assert lines[1].split() == ["half", TRANSACTION_HALF_TOPIC, str(HALVES)]
    assert lines[2].split() == ["op", TRANSACTION_OP_TOPIC, "1"]
    assert lines[3].split() == ["discarded", "-", "-"]
    assert lines[5:7] == ["check progress",
                          "GROUP              HALF_OFFSET  OP_OFFSET  PENDING  WAITING  "
                          "LAST_PASS"]
    assert lines[7].split() == [CHECK_GROUP, str(CHECKED), "1", str(HALVES - CHECKED), "-",
                                "-"]
    assert lines[-1].startswith(f"{HALVES - CHECKED} half message(s) past the check's "
                                f"progress; no check pass seen")


def test_transactions_with_an_unreadable_progress_file_is_one_line(
        running: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    _transactions(capsys, running)
    ConsumerOffsets(running.store_dir, lock_timeout_ms=1000).path(CHECK_GROUP).write_text(
        "not json")
    broken = admin(capsys, "transactions", *running.options())
    assert (broken.code, broken.err.count("\n")) == (1, 1)
    assert "answered 500 OFFSETS_CORRUPT" in broken.err
