"""The front counts each END_TRANSACTION (37) by outcome and whether it answers a check, each
half the check service takes up by outcome, and keeps what its last pass left waiting
(services/notifier/remoting/transaction_counts.py); the notifier's metrics expose exactly
those figures and `GET /v1/transactions` the last pass
(services/notifier/transaction_status.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mqstore.services.common.observability.metrics import new_registry
from mqstore.services.common.topics.rules import (
    TRANSACTION_CHECK_MAX_TOPIC,
    TRANSACTION_HALF_TOPIC,
)
from mqstore.services.notifier.metrics import transaction_metrics
from mqstore.services.notifier.remoting.context import Front
from mqstore.services.notifier.remoting.transaction_counts import TransactionCounts
from mqstore.services.notifier.transaction_status import TransactionStatus
from mqstore.storage import MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from tests.remoting.test_transactions import (
    Rig,
    StoreLink,
    answer_checks,
    check_pass,
    end,
    ended,
    half_send,
    stored,
)
from tests.storage.dispatch.split_helpers import indexer_config, writer_config

COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0
LABELS = ("outcome", "from_check")
"""The order of a sample's label values in `_samples`' keys."""
OLD_MS = 5000
"""How far back an old half was born: past the rig's 1 s transaction timeout."""


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with MessageStore.open(tmp_path, writer_config()) as writer, \
            Indexer.open(tmp_path, indexer_config()) as indexer:
        yield Rig(tmp_path, StoreLink(writer, indexer))


def _samples(counts: TransactionCounts) -> dict[tuple[str, ...], float]:
    text = generate_latest(new_registry(transaction_metrics(counts))).decode()
    return {(sample.name, *(sample.labels[label] for label in LABELS
                            if label in sample.labels)): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def _old_ms() -> int:
    return int(time.time() * 1000) - OLD_MS


def _status(front: Front) -> dict[str, Any]:
    offsets = ConsumerOffsets(front.view.directory, lock_timeout_ms=1000)  # the front's wins
    status = TransactionStatus(front.view, offsets, front=front)
    response = asyncio.run(status.transactions(make_mocked_request("GET", "/v1/transactions")))
    assert response.status == 200 and response.text is not None
    document: dict[str, Any] = json.loads(response.text)
    return document


def test_ends_are_counted_by_outcome_and_whether_they_answer_a_check(rig: Rig) -> None:
    with rig.front() as front:
        ended(front, half_send(front, "C"), COMMIT)
        ended(front, half_send(front, "R"), ROLLBACK)
        ended(front, half_send(front, "U", born_ms=_old_ms()), UNKNOWN)
        refused = end(front, COMMIT, half_offset=0, position=0, group="other")
        assert refused is not None and refused.code != 0
        check_pass(front)  # asks about U
        assert answer_checks(rig, front, COMMIT) == 1
        counts = front.transaction_counts
    assert {key: total for key, total in counts.ends.items() if total} == {
        ("commit", False): 1, ("rollback", False): 1, ("unknown", False): 1,
        ("refused", False): 1, ("commit", True): 1}
    assert counts.checks == {"asked": 1, "unasked": 0, "discarded": 0}
    samples = _samples(counts)
    assert samples[("mqstore_remoting_transaction_ends_total", "commit", "true")] == 1
    assert samples[("mqstore_remoting_transaction_ends_total", "refused", "false")] == 1
    assert samples[("mqstore_remoting_transaction_ends_total", "rollback", "true")] == 0
    assert samples[("mqstore_remoting_transaction_checks_total", "asked")] == 1


def test_a_half_with_no_live_producer_is_unasked_then_discarded(rig: Rig) -> None:
    with rig.front(transaction_check_max=1) as front:
        half_send(front, "N", born_ms=_old_ms(), PGROUP="gone")  # nobody of group gone
        check_pass(front)
        assert front.transaction_counts.checks == {"asked": 0, "unasked": 1, "discarded": 0}
        time.sleep(0.002)  # the next pass begins after the re-put was stored
        check_pass(front)
        assert front.transaction_counts.checks == {"asked": 0, "unasked": 1, "discarded": 1}
        assert len(stored(front, TRANSACTION_CHECK_MAX_TOPIC)) == 1
        assert rig.pushed == []
        samples = _samples(front.transaction_counts)
    assert samples[("mqstore_remoting_transaction_checks_total", "discarded")] == 1
    assert samples[("mqstore_remoting_transaction_half_messages_waiting",)] == 0


def test_the_last_pass_counts_the_halves_no_op_ends(rig: Rig) -> None:
    """Halves 0 (old, unknown), 1 (committed), 2 (young): the pass re-puts 0 at 3 and
    stops at 2; 2 and 3 wait.  Once 3's check is answered, only 2 does."""
    with rig.front() as front:
        half_send(front, "U", born_ms=_old_ms())
        ended(front, half_send(front, "C"), COMMIT)
        half_send(front, "young", CHECK_IMMUNITY_TIME_IN_SECONDS="600")  # young all along
        check_pass(front)
        first = front.transaction_counts.last_pass
        assert first is not None
        assert (first.half_offset, first.half_max_offset, first.ops_complete,
                first.waiting) == (2, 4, True, 2)
        assert answer_checks(rig, front, COMMIT) == 1
        check_pass(front)
        document = _status(front)
    assert document["last_pass"]["waiting"] == 1
    assert document["last_pass"]["op_offset"] <= document["last_pass"]["op_max_offset"] == 2
    assert document["check"] == {"group": "CID_RMQ_SYS_TRANS", "half_offset": 2,
                                 "op_offset": document["last_pass"]["op_offset"],
                                 "pending": 2}
    assert document["half_topic"]["topic"] == TRANSACTION_HALF_TOPIC
    assert document["half_topic"]["messages"] == 4
    assert document["discarded_topic"] is None
    samples = _samples(front.transaction_counts)
    assert samples[("mqstore_remoting_transaction_half_messages_waiting",)] == 1
    finished_s = samples[("mqstore_remoting_transaction_check_pass_timestamp_seconds",)]
    assert abs(finished_s - time.time()) < 60


def test_a_pass_over_no_half_topic_leaves_nothing_waiting(rig: Rig) -> None:
    with rig.front() as front:
        assert _status(front)["last_pass"] is None
        check_pass(front)
        document = _status(front)
    assert document["last_pass"]["waiting"] == 0
    assert document["half_topic"] is None and document["check"]["pending"] == 0


def test_the_counters_exist_before_any_transaction_and_the_gauges_after_a_pass() -> None:
    """Fixed label values, every one present at 0 (rate() and the alert see a counter from
    the front's start); the last pass's gauges only once a pass has ended."""
    samples = _samples(TransactionCounts())
    assert samples == {
        **{("mqstore_remoting_transaction_ends_total", outcome, from_check): 0
           for outcome in ("commit", "rollback", "unknown", "refused")
           for from_check in ("false", "true")},
        **{("mqstore_remoting_transaction_checks_total", outcome): 0
           for outcome in ("asked", "unasked", "discarded")}}
