"""The writer's delay series carry what happened: produces moved to the schedule
(ProduceCore.delayed), messages delivered and skipped by the schedule, and the messages
waiting per level (services/writer/delay_metrics.py), read at scrape time without touching
the file system."""

from __future__ import annotations

import asyncio
import os
import pathlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mqstore.services.common.links.forward_wire import KIND_SINGLE, ForwardRequest
from mqstore.services.common.observability.metrics import new_registry
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.app import METRICS, PRODUCE, create_app
from mqstore.services.writer.delay_metrics import delay_schedule_metrics
from mqstore.services.writer.delay_schedule import DelaySchedule
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.format.delay_levels import SCHEDULE_TOPIC
from mqstore.storage.format.properties import encode_properties
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

LEVELS = "1s 2s 3s"
SETTINGS = WriterSettings(forward_port=0, topic_queue_count=4)
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> Samples:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name.startswith("mqstore_delay_")}


def _waiting(samples: Samples) -> dict[str, float]:
    return {dict(labels)["level"]: value for (name, labels), value in samples.items()
            if name == "mqstore_delay_messages_waiting"}


def _send(properties: dict[str, str]) -> ForwardRequest:
    return ForwardRequest(1, KIND_SINGLE, 2, 0, 0, 0, 0, "10.0.0.1:5000", "Orders",
                          encode_properties(properties), b"late")


async def _passes(schedule: DelaySchedule, *, now_ms: int, until: Callable[[], bool],
                  timeout_s: float = 20.0) -> None:
    """Passes at `now_ms` until `until()`: the schedule sees an entry only once the indexer
    has published its `dispatched` file, which a loaded machine may take a while to do."""
    deadline = time.monotonic() + timeout_s
    while not until():
        assert time.monotonic() < deadline, "the schedule never saw the entries"
        await schedule.deliver_due(now_ms=now_ms)
        await asyncio.sleep(0.01)


def test_scheduled_delivered_skipped_and_waiting_follow_the_schedule(tmp_path: Path) -> None:
    async def scenario() -> list[Samples]:
        writer = MessageStore.open(tmp_path, writer_config(message_delay_levels=LEVELS))
        indexer = Indexer.open(tmp_path, indexer_config(message_delay_levels=LEVELS))
        app = create_app(writer, SETTINGS)
        schedule = DelaySchedule(app[PRODUCE], writer, SETTINGS)
        app[METRICS].add(delay_schedule_metrics(schedule, levels=app[PRODUCE].delay_levels))
        server = ForwardServer(app[PRODUCE], SETTINGS)
        scraped = []

        def scrape() -> None:
            scraped.append(_samples(generate_latest(app[METRICS].registry).decode()))

        try:
            scrape()
            answer = await server.store(_send({"DELAY": "2"}))
            assert answer.status == "PUT_OK", answer
            assert (await server.store(_send({}))).status == "PUT_OK"  # not delayed
            # No REAL_TOPIC: undeliverable (only the broker writes the schedule topic).
            (lost,) = await app[PRODUCE].put([Message(SCHEDULE_TOPIC, 0, b"lost",
                                                      properties={"DELAY": "1"})])
            assert lost.ok
            stored_ms = answer.results[0][2]
            await asyncio.sleep(0.05)  # the writer publishes its positions after a loop turn
            wait_dispatched(indexer, writer.committed_position)
            await _passes(schedule, now_ms=stored_ms + 1999, until=lambda: (
                schedule.skipped_total == 1 and schedule.pending() == {2: 1}))
            scrape()
            await _passes(schedule, now_ms=stored_ms + 2000,
                          until=lambda: schedule.delivered_total == 1)
            scrape()
        finally:
            await schedule.stop()
            indexer.close()
            writer.close()
            schedule.persist_after_close(clean=True)
        return scraped

    before, waiting, delivered = run(scenario)
    idle: Samples = {("mqstore_delay_messages_scheduled_total", ()): 0,
                     ("mqstore_delay_messages_delivered_total", ()): 0,
                     ("mqstore_delay_messages_skipped_total", ()): 0}
    idle.update({("mqstore_delay_messages_waiting", (("level", level),)): 0 for level in "123"})
    assert before == idle  # every level of the table, 0 where nothing waits
    assert waiting[("mqstore_delay_messages_scheduled_total", ())] == 1
    assert waiting[("mqstore_delay_messages_skipped_total", ())] == 1
    assert waiting[("mqstore_delay_messages_delivered_total", ())] == 0
    assert _waiting(waiting) == {"1": 0, "2": 1, "3": 0}
    assert delivered[("mqstore_delay_messages_delivered_total", ())] == 1
    assert _waiting(delivered) == {"1": 0, "2": 0, "3": 0}


def test_a_scrape_makes_no_file_system_call(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The waiting gauge is the view's offsets in memory: a scrape never lists or stats a
    directory, whatever the number of levels."""
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a scrape touched the file system")

    async def scenario() -> str:
        writer = MessageStore.open(tmp_path, writer_config(message_delay_levels=LEVELS))
        app = create_app(writer, SETTINGS)
        schedule = DelaySchedule(app[PRODUCE], writer, SETTINGS)
        registry = new_registry(delay_schedule_metrics(schedule,
                                                       levels=app[PRODUCE].delay_levels))
        try:
            with monkeypatch.context() as patched:
                for name in ("scandir", "listdir", "stat", "open"):
                    patched.setattr(os, name, refused)
                patched.setattr(pathlib.Path, "iterdir", refused)
                return generate_latest(registry).decode()
        finally:
            await schedule.stop()
            writer.close()
            schedule.persist_after_close(clean=True)

    assert "mqstore_delay_messages_waiting" in run(scenario)
