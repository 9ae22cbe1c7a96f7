"""Delay levels end to end in one process: a produce asking for a level waits in
`SCHEDULE_TOPIC_XXXX` (services/writer/delayed_puts.py), its consume queue entry says when
it is due (the indexer), and the writer's schedule puts it back into its own topic and queue
when it is due, once (services/writer/delay_schedule.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqstore.services.common.links.forward_wire import KIND_BATCH, KIND_SINGLE, ForwardRequest
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.app import PRODUCE, create_app
from mqstore.services.writer.delay_schedule import DelaySchedule
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.delay_offsets_file import DelayOffsetsFile
from mqstore.storage.format.properties import encode_properties
from mqstore.storage.reads.store_view import StoreView
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_readable, writer_config

LEVELS = "1s 2s 3s"
SETTINGS = WriterSettings(forward_port=0, topic_queue_count=4)
BORN_MS = 1_700_000_000_000


@contextlib.asynccontextmanager
async def _writer_and_indexer(directory: Path
                              ) -> AsyncIterator[tuple[ForwardServer, DelaySchedule, Indexer]]:
    writer = MessageStore.open(directory, writer_config(message_delay_levels=LEVELS))
    indexer = Indexer.open(directory, indexer_config(message_delay_levels=LEVELS))
    core = create_app(writer, SETTINGS)[PRODUCE]
    schedule = DelaySchedule(core, writer, SETTINGS)
    try:
        yield ForwardServer(core, SETTINGS), schedule, indexer
    finally:
        await schedule.stop()
        indexer.close()
        writer.close()
        schedule.persist_after_close(clean=writer.failure is None)


def _send(topic: str, queue_id: int, body: bytes, properties: dict[str, str],
          kind: int = KIND_SINGLE) -> ForwardRequest:
    return ForwardRequest(1, kind, queue_id, 0, 0, BORN_MS, 0, "10.0.0.1:5000", topic,
                          encode_properties(properties), body)


async def _dispatched(writer: MessageStore, directory: Path) -> None:
    """Until a reader sees everything `writer` stored (the writer publishes its positions at
    the end of a loop turn: give it one)."""
    await asyncio.sleep(0)
    wait_readable(directory, writer.committed_position)


def _log_end(directory: Path) -> int:
    with StoreView.open(directory, indexer_config()) as view:
        return view.log.committed_position


def _tags_code(indexer: Indexer, topic: str, queue_id: int, offset: int) -> int:
    queue = indexer.queues.get(topic, queue_id)
    assert queue is not None
    held = queue.read(offset, 1)
    assert held is not None
    queue_file, entries = held
    code = int(entries["tags_code"][0])
    del entries
    queue_file.release()
    return code


def test_a_delayed_send_waits_for_its_level_and_is_delivered_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _writer_and_indexer(tmp_path) as (server, schedule, indexer):
            answer = await server.store(_send("Orders", 2, b"late", {"KEYS": "k1",
                                                                      "DELAY": "2"}))
            assert answer.status == "PUT_OK", answer
            (schedule_offset, _, stored_ms), = answer.results
            await _dispatched(schedule.store, tmp_path)
            assert _tags_code(indexer, "SCHEDULE_TOPIC_XXXX", 1, schedule_offset) == \
                stored_ms + 2000
            assert indexer.queues.get("Orders", 2) is None  # nothing delivered yet
            assert await schedule.deliver_due(now_ms=stored_ms + 1999) == 0
            assert schedule.pending() == {2: 1}
            assert await schedule.deliver_due(now_ms=stored_ms + 2000) == 1
            assert await schedule.deliver_due(now_ms=stored_ms + 9000) == 0
            await _dispatched(schedule.store, tmp_path)
            with StoreView.open(tmp_path, indexer_config()) as view, \
                    view.get("Orders", 2, 0, 10) as got:
                (delivered,) = got.messages
                assert bytes(delivered.body) == b"late"
                assert delivered.born_host == "10.0.0.1:5000"
                assert delivered.born_timestamp_ms == BORN_MS
                assert delivered.properties == {"KEYS": "k1", "DELAY": "2",
                                                "REAL_TOPIC": "Orders", "REAL_QID": "2"}
            assert schedule.pending() == {}
        assert DelayOffsetsFile(tmp_path).read() == {2: 1}

    run(scenario)


def test_a_level_past_the_table_is_clamped_and_a_level_below_one_is_no_delay(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _writer_and_indexer(tmp_path) as (server, schedule, _):
            clamped = await server.store(_send("Orders", 0, b"a", {"DELAY": "99"}))
            plain = await server.store(_send("Orders", 0, b"b", {"DELAY": "0"}))
            await _dispatched(schedule.store, tmp_path)
            with StoreView.open(tmp_path, indexer_config()) as view:
                waiting = view.message_at(clamped.results[0][1])
                assert (waiting.topic, waiting.queue_id) == ("SCHEDULE_TOPIC_XXXX", 2)
                assert waiting.properties["DELAY"] == "3"
                assert view.message_at(plain.results[0][1]).topic == "Orders"

    run(scenario)


def test_a_batch_asking_for_a_delay_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _writer_and_indexer(tmp_path) as (server, _, _):
            entry = (b"\0" * 4 + b"\0" * 8 + (0).to_bytes(4, "big") + (1).to_bytes(4, "big")
                     + b"x")
            properties = encode_properties({"DELAY": "1"})
            entry += len(properties).to_bytes(2, "big") + properties
            entry = len(entry).to_bytes(4, "big") + entry[4:]
            answer = await server.store(_send("Orders", 0, entry, {}, kind=KIND_BATCH))
            assert answer.status == "MESSAGE_ILLEGAL"
            assert "batch cannot hold delayed messages" in answer.reason
            assert _log_end(tmp_path) == 0

    run(scenario)


@pytest.mark.parametrize("real", [{}, {"REAL_TOPIC": "Orders", "REAL_QID": "x"},
                                  {"REAL_TOPIC": "RMQ_SYS_TRANS_HALF_TOPIC", "REAL_QID": "0"}])
def test_a_schedule_record_that_cannot_be_delivered_is_skipped_not_retried_forever(
        tmp_path: Path, real: dict[str, str]) -> None:
    async def scenario() -> None:
        async with _writer_and_indexer(tmp_path) as (_, schedule, _indexer):
            result = schedule.store.put(Message("SCHEDULE_TOPIC_XXXX", 0, b"odd", properties={
                "DELAY": "1", **real}))
            await _dispatched(schedule.store, tmp_path)
            assert await schedule.deliver_due(now_ms=result.store_timestamp_ms + 1000) == 1
            assert schedule.skipped_total == 1 and schedule.delivered_total == 0
            assert schedule.offsets == {1: 1}

    run(scenario)
