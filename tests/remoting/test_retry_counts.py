"""The front counts each send-back (36) by outcome and each message it sends to a dead letter
queue by path (services/notifier/remoting/retry_counts.py), and the notifier's metrics
expose exactly those counts."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mqstore.services.common.links.forward_wire import (
    KIND_ROUTED,
    KIND_SINGLE,
    ForwardAnswer,
    ForwardRequest,
)
from mqstore.services.common.observability.metrics import new_registry
from mqstore.services.notifier.metrics import retry_metrics
from mqstore.services.notifier.remoting import codes, retries
from mqstore.services.notifier.remoting.codes import RemotingError
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.retry_counts import RetryCounts
from mqstore.storage import Message, MessageStore, PutStatus
from mqstore.storage.dispatch.indexer import Indexer
from tests.remoting.fronts import front_over
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

PEER = Peer("10.0.0.9:50000", 1)


class StoringLink:
    """A writer link that stores nothing and answers PUT_OK, keeping what it was sent."""

    def __init__(self, status: PutStatus = PutStatus.PUT_OK) -> None:
        self.sent: list[ForwardRequest] = []
        self.status = status

    async def send(self, request: ForwardRequest) -> ForwardAnswer:
        self.sent.append(request)
        if self.status is not PutStatus.PUT_OK:
            return ForwardAnswer(request.request_id, self.status.value, [], "refused")
        return ForwardAnswer(request.request_id, PutStatus.PUT_OK.value,
                             [(len(self.sent) - 1, 1000, 0)], "")


def _written(directory: Path) -> int:
    """One message of topic Orders in `directory`, dispatched; its commit log position."""
    with MessageStore.open(directory, writer_config()) as writer, \
            Indexer.open(directory, indexer_config()) as indexer:
        result = writer.put(Message("Orders", 0, b"failed"))
        assert result.ok
        wait_dispatched(indexer, writer.committed_position)
        return result.physical_offset


def _send_back(front: Front, offset: int, **ext: str) -> Command:
    request = Command(codes.CONSUMER_SEND_MSG_BACK, 7, 0,
                      {"offset": str(offset), "group": "billing", **ext})
    return asyncio.run(retries.send_back(front, request, PEER))


def _samples(counts: RetryCounts) -> dict[tuple[str, str], float]:
    text = generate_latest(new_registry(retry_metrics(counts))).decode()
    return {(sample.name, next(iter(sample.labels.values()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_send_backs_are_counted_by_outcome_and_dead_letters_by_path(tmp_path: Path) -> None:
    offset = _written(tmp_path)
    link = StoringLink()
    with front_over(tmp_path, config=indexer_config(store_host="127.0.0.1:9876")) as served:
        front = dataclasses.replace(served, link=link)  # type: ignore[arg-type]
        assert _send_back(front, offset).code == codes.SUCCESS
        assert front.topics.get("%DLQ%billing") is None
        assert _send_back(front, offset, delayLevel="-1").code == codes.SUCCESS
        # routed at once, though the link stored nothing the store view could notice
        assert front.topics.require("%DLQ%billing").read_queue_nums == 1
        with pytest.raises(RemotingError, match="look message by offset failed"):
            _send_back(front, offset + 1)  # no message starts there
        link.status = PutStatus.SERVICE_NOT_AVAILABLE
        with pytest.raises(RemotingError, match="SERVICE_NOT_AVAILABLE"):
            _send_back(front, offset)
        assert [sent.topic for sent in link.sent] == ["%RETRY%billing", "%DLQ%billing",
                                                      "%RETRY%billing"]
        counts = front.retry_counts
    assert counts.send_backs == {"retry": 1, "dead_letter": 1, "refused": 2}
    assert counts.dead_letters == {"send_back": 1, "retry_send": 0, "nack": 0}
    samples = _samples(counts)
    assert samples[("mqstore_remoting_send_backs_total", "refused")] == 2
    assert samples[("mqstore_remoting_dead_letters_total", "send_back")] == 1
    assert samples[("mqstore_remoting_dead_letters_total", "retry_send")] == 0


def test_a_clients_own_retry_send_past_its_max_counts_as_a_dead_letter(
        tmp_path: Path) -> None:
    def forward(reconsume_times: int) -> ForwardRequest:
        return ForwardRequest(0, KIND_SINGLE, 0, 0, 0, 0, reconsume_times, PEER.address,
                              "%RETRY%billing", b"", b"body")

    request = Command(codes.SEND_MESSAGE_V2, 7, 0, {"maxReconsumeTimes": "3"})
    with front_over(tmp_path) as front:
        kept = retries.dead_letter_if_spent(front, request, forward(3))
        assert (kept.kind, kept.topic) == (KIND_SINGLE, "%RETRY%billing")
        assert front.topics.get("%DLQ%billing") is None
        assert front.retry_counts.dead_letters == {"send_back": 0, "retry_send": 0, "nack": 0}
        routed = retries.dead_letter_if_spent(front, request, forward(4))
        assert (routed.kind, routed.topic) == (KIND_ROUTED, "%DLQ%billing")
        assert front.topics.get("%DLQ%billing") is not None
        assert front.retry_counts.dead_letters == {"send_back": 0, "retry_send": 1, "nack": 0}
        assert front.retry_counts.send_backs == {"retry": 0, "dead_letter": 0, "refused": 0}


def test_the_series_exist_before_any_send_back() -> None:
    """Fixed label values, every one present at 0: rate() and the DLQ alert see a counter
    from the front's start, not from its first dead letter."""
    assert _samples(RetryCounts()) == {
        ("mqstore_remoting_send_backs_total", "retry"): 0,
        ("mqstore_remoting_send_backs_total", "dead_letter"): 0,
        ("mqstore_remoting_send_backs_total", "refused"): 0,
        ("mqstore_remoting_dead_letters_total", "send_back"): 0,
        ("mqstore_remoting_dead_letters_total", "retry_send"): 0,
        ("mqstore_remoting_dead_letters_total", "nack"): 0,
        ("mqstore_nacks_total", "retry"): 0,
        ("mqstore_nacks_total", "dead_letter"): 0,
        ("mqstore_nacks_total", "refused"): 0}
