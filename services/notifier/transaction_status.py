"""`GET /v1/transactions`: the half messages of transactions and how far the check has come.

    GET /v1/transactions   the half, op and discarded topics (`RMQ_SYS_TRANS_HALF_TOPIC`,
                           `RMQ_SYS_TRANS_OP_HALF_TOPIC`, `TRANS_CHECK_MAX_TIME_TOPIC`) with
                           their queues and message counts, the check's progress and
                           pending halves, and the remoting front's last check pass

A route of its own rather than more of `GET /v1/retries`: that one is per consumer group,
and transactions belong to producer groups and live in three topics of the broker's own.

| field       | what                                                                   |
|-------------|------------------------------------------------------------------------|
| `check`     | the progress of group `CID_RMQ_SYS_TRANS` on the half and op queues    |
|             | (services/notifier/remoting/transaction_check.py): the front's offset  |
|             | table when the notifier serves the front, else the group's file under  |
|             | `config/consumer-offsets/` (what the front last wrote); `pending`: the |
|             | half queue's max offset minus that progress, live, an upper bound on   |
|             | the halves waiting (every half with no op has its latest copy there,   |
|             | but so have halves whose op the check has not walked past yet)         |
| `last_pass` | with the front, what its last check pass counted                      |
|             | (services/notifier/remoting/transaction_counts.py): `waiting`, the     |
|             | halves no op ends, as of `finished_ms`; null before the first pass and |
|             | without the front                                                      |

500 `OFFSETS_CORRUPT` when, without the front, the check group's file cannot be read.

A topic's messages are max_offset - min_offset, as `GET /v1/retries` counts them; the half
topic's count includes every re-put of a checked half, so it is not a count of
transactions.  `mqstore admin transactions` shows this (services/admin/retries.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from mqstore.services.common.http.answers import ServiceError, json_response
from mqstore.services.common.observability.metrics import CallbackMetrics
from mqstore.services.common.topics.rules import (
    TRANSACTION_CHECK_MAX_TOPIC,
    TRANSACTION_HALF_TOPIC,
    TRANSACTION_OP_TOPIC,
)
from mqstore.services.notifier.metrics import transaction_metrics
from mqstore.services.notifier.remoting.transaction_check import CHECK_GROUP
from mqstore.services.notifier.retry_status import topic_json
from mqstore.storage import StoreFormatError
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView

if TYPE_CHECKING:
    from mqstore.services.notifier.remoting.context import Front

TOPICS = {"half_topic": TRANSACTION_HALF_TOPIC, "op_topic": TRANSACTION_OP_TOPIC,
          "discarded_topic": TRANSACTION_CHECK_MAX_TOPIC}
"""Each transaction topic by its field in the answer."""


def transactions_json(view: StoreView, progress: dict[str, int | None],
                      last_pass: dict[str, Any] | None) -> dict[str, Any]:
    """The answer from the view, the check's `progress` (topic -> committed offset on queue
    0, None if none) and the last pass (None: none)."""
    topics = set(view.topics())
    document: dict[str, Any] = {
        field: topic_json(view, topic) if topic in topics else None
        for field, topic in TOPICS.items()}
    half_offset = progress.get(TRANSACTION_HALF_TOPIC)
    half_start = max(half_offset or 0, view.min_offset(TRANSACTION_HALF_TOPIC, 0))
    document["check"] = {
        "group": CHECK_GROUP, "half_offset": half_offset,
        "op_offset": progress.get(TRANSACTION_OP_TOPIC),
        "pending": max(0, view.max_offset(TRANSACTION_HALF_TOPIC, 0) - half_start)}
    document["last_pass"] = last_pass
    return document


def add_transactions(app: web.Application, view: StoreView, offsets: ConsumerOffsets,
                     registry: CollectorRegistry, front: Front | None) -> None:
    """Serve GET /v1/transactions on `app`; with the remoting `front`, its transaction
    series too, in the notifier's metrics `registry` (services/notifier/metrics.py)."""
    app.router.add_get("/v1/transactions",
                       TransactionStatus(view, offsets, front=front).transactions,
                       allow_head=False)
    if front is not None:
        registry.register(CallbackMetrics(transaction_metrics(front.transaction_counts)))


class TransactionStatus:
    """The view over the notifier's store view, the check's offsets and, when the notifier
    serves the remoting front, its last pass."""

    def __init__(self, view: StoreView, offsets: ConsumerOffsets, *,
                 front: Front | None) -> None:
        self._view = view
        self._offsets = offsets
        self._front = front

    async def transactions(self, request: web.Request) -> web.Response:
        """GET /v1/transactions"""
        front = self._front
        if front is not None:
            progress = {topic: front.offsets.query(CHECK_GROUP, topic, 0)
                        for topic in (TRANSACTION_HALF_TOPIC, TRANSACTION_OP_TOPIC)}
            found = front.transaction_counts.last_pass
            last_pass = None if found is None else dataclasses.asdict(found)
        else:  # the group's file: off the loop, as the offsets files are read
            progress = await asyncio.to_thread(self._stored_progress)
            last_pass = None
        return json_response(transactions_json(self._view, progress, last_pass))

    def _stored_progress(self) -> dict[str, int | None]:
        try:
            return {topic: self._offsets.fetch(CHECK_GROUP, topic).get(0)
                    for topic in (TRANSACTION_HALF_TOPIC, TRANSACTION_OP_TOPIC)}
        except StoreFormatError as error:
            raise ServiceError(500, "OFFSETS_CORRUPT", str(error)) from None
