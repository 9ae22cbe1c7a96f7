"""Timer messages end to end in one process: a produce asking for a delivery time waits in
`rmq_sys_wheel_timer` (services/writer/timer_puts.py), the writer's timer schedule moves it
into the wheel and puts it back into its own topic and queue at the time asked, once
(services/writer/timer_schedule.py), and a schedule started again after a crash delivers
nothing twice (services/writer/timer_recovery.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

from mqstore.services.common.links.forward_wire import KIND_SINGLE, ForwardRequest
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.app import PRODUCE, create_app
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.services.writer.timer_schedule import TimerSchedule
from mqstore.storage import MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.format.properties import encode_properties
from mqstore.storage.reads.store_view import StoreView
from mqstore.storage.timer.timer_checkpoint import TimerCheckpoint
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

SETTINGS = WriterSettings(forward_port=0, topic_queue_count=4,
                          timer_log_file_size_bytes=1 << 20)
BORN_MS = 1_700_000_000_000
TIMER = "rmq_sys_wheel_timer"


@contextlib.asynccontextmanager
async def _writer_and_indexer(directory: Path, settings: WriterSettings = SETTINGS,
                              *, clean: bool = True
                              ) -> AsyncIterator[tuple[ForwardServer, TimerSchedule, Indexer]]:
    writer = MessageStore.open(directory, writer_config())
    indexer = Indexer.open(directory, indexer_config())
    core = create_app(writer, settings)[PRODUCE]
    timers = TimerSchedule(core, writer, settings)
    try:
        yield ForwardServer(core, settings), timers, indexer
    finally:
        if clean:
            await timers.stop()
        await asyncio.sleep(0.01)  # the loop publishes the last puts' positions
        indexer.close()
        writer.close()
        timers.persist_after_close(clean=clean and writer.failure is None)


def _send(topic: str, queue_id: int, body: bytes, properties: dict[str, str]) -> ForwardRequest:
    return ForwardRequest(1, KIND_SINGLE, queue_id, 0, 0, BORN_MS, 0, "10.0.0.1:5000", topic,
                          encode_properties(properties), body)


async def _dispatched(indexer: Indexer, directory: Path) -> None:
    await asyncio.sleep(0.05)  # the writer publishes its positions at the end of a loop turn
    with StoreView.open(directory, indexer_config()) as view:
        end = view.log.committed_position
        wait_dispatched(indexer, end)
        deadline = time.monotonic() + 10
        while view.dispatched_position < end:  # the indexer's `dispatched` file follows
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
            view.refresh()


def _queue(directory: Path, topic: str, queue_id: int) -> list[dict[str, str]]:
    with StoreView.open(directory, indexer_config()) as view, \
            view.get(topic, queue_id, 0, 100) as got:
        return [dict(message.properties) | {"body": bytes(message.body).decode()}
                for message in got.messages]


def test_a_timed_send_waits_in_the_wheel_and_is_delivered_once_at_the_time_asked(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _writer_and_indexer(tmp_path) as (server, timers, indexer):
            deliver_ms = int(time.time() * 1000) + 5_500
            answer = await server.store(_send("Orders", 2, b"later", {
                "KEYS": "k1", "UNIQ_KEY": "U1", "TIMER_DELIVER_MS": str(deliver_ms)}))
            assert answer.status == "PUT_OK", answer
            assert answer.results[0][0] == 0  # the offset in rmq_sys_wheel_timer/0
            await _dispatched(indexer, tmp_path)
            (waiting,) = _queue(tmp_path, TIMER, 0)
            out_ms = deliver_ms // 1000 * 1000
            assert (waiting["TIMER_OUT_MS"], waiting["REAL_TOPIC"], waiting["REAL_QID"]) == \
                (str(out_ms), "Orders", "2")
            assert await timers.run_pass(now_ms=out_ms - 3000) == (1, 0)
            assert timers.pending() == 1
            # Its slot begins at out_ms; it is due at the time asked, within the slot.
            assert await timers.run_pass(now_ms=deliver_ms - 1) == (0, 0)
            assert timers.next_due_ms == deliver_ms
            assert await timers.run_pass(now_ms=deliver_ms) == (0, 1)
            assert await timers.run_pass(now_ms=out_ms + 9000) == (0, 0)
            await _dispatched(indexer, tmp_path)
            (delivered,) = _queue(tmp_path, "Orders", 2)
            assert delivered["body"] == "later"
            assert delivered["TIMER_ENQUEUE_MS"] == str(out_ms - 3000)
            assert delivered["TIMER_DEQUEUE_MS"] == str(deliver_ms)
            assert delivered["TIMER_OUT_MS"] == str(out_ms)
            assert delivered["REAL_TOPIC"] == "Orders"
            assert timers.pending() == 0
        progress = TimerCheckpoint(tmp_path).read()
        assert (progress.last_timer_queue_offset, progress.last_timer_log_flush_position) == \
            (1, 52)
        assert progress.last_read_time_ms == out_ms + 9000

    run(scenario)


def test_a_time_in_the_past_is_stored_at_once_and_one_too_far_is_refused(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _writer_and_indexer(tmp_path) as (server, _, indexer):
            now_ms = int(time.time() * 1000)
            past = await server.store(_send("Orders", 1, b"now", {
                "TIMER_DELIVER_MS": str(now_ms - 10)}))
            far = await server.store(_send("Orders", 1, b"far", {
                "TIMER_DELAY_SEC": str(3 * 86_400 + 5)}))
            bad = await server.store(_send("Orders", 1, b"bad", {"TIMER_DELAY_MS": "soon"}))
            both = await server.store(_send("Orders", 1, b"both", {
                "DELAY": "1", "TIMER_DELAY_SEC": "5"}))
            assert past.status == "PUT_OK"
            assert (far.status, bad.status) == ("MESSAGE_ILLEGAL", "MESSAGE_ILLEGAL")
            assert far.reason == (
                "timer message illegal, the delay time should not be bigger than the max delay "
                "259200000ms; or if set del msg, the delay time should be bigger than the "
                "current time")
            await _dispatched(indexer, tmp_path)
            (stored,) = _queue(tmp_path, "Orders", 1)
            assert stored["TIMER_DELIVER_MS"] == str(now_ms - 10)
            (delayed,) = _queue(tmp_path, "SCHEDULE_TOPIC_XXXX", 0)
            assert "TIMER_DELAY_SEC" not in delayed
            assert both.status == "PUT_OK"

    run(scenario)


def test_a_delay_past_the_roll_window_is_parked_and_put_back_into_the_timer_topic(
        tmp_path: Path) -> None:
    settings = WriterSettings(forward_port=0, topic_queue_count=4,
                              timer_log_file_size_bytes=1 << 20, timer_roll_window_slots=10)
    async def scenario() -> None:
        async with _writer_and_indexer(tmp_path, settings) as (server, timers, indexer):
            await server.store(_send("Orders", 0, b"roll", {"TIMER_DELAY_SEC": "12"}))
            await _dispatched(indexer, tmp_path)
            (waiting,) = _queue(tmp_path, TIMER, 0)
            out_ms = int(waiting["TIMER_OUT_MS"])
            write_ms = out_ms - 12_000
            assert await timers.run_pass(now_ms=write_ms) == (1, 0)
            # 12 s is beyond the 10 s window by less than a third of it: parked half way,
            # put back into the timer topic when that slot begins
            assert await timers.run_pass(now_ms=write_ms + 4_999) == (0, 0)
            assert await timers.run_pass(now_ms=write_ms + 5_000) == (0, 1)
            await _dispatched(indexer, tmp_path)
            rolled = _queue(tmp_path, TIMER, 0)[1]
            assert rolled["TIMER_ROLL_TIMES"] == "1"
            assert rolled["TIMER_OUT_MS"] == str(out_ms)
            assert await timers.run_pass(now_ms=write_ms + 6_000) == (1, 0)
            # A rolled relative delay has lost its store time: due at its slot's end
            assert await timers.run_pass(now_ms=out_ms + 999) == (0, 0)
            assert await timers.run_pass(now_ms=out_ms + 1000) == (0, 1)
            await _dispatched(indexer, tmp_path)
            (delivered,) = _queue(tmp_path, "Orders", 0)
            assert delivered["TIMER_ROLL_TIMES"] == "1"

    run(scenario)


def test_after_a_crash_the_copies_already_delivered_are_not_delivered_again(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        out_ms = 0
        async with _writer_and_indexer(tmp_path, clean=False) as (server, timers, indexer):
            deliver_ms = int(time.time() * 1000) + 5_500
            for index in range(6):
                await server.store(_send("Orders", 3, b"m%d" % index, {
                    "UNIQ_KEY": f"U{index}", "TIMER_DELIVER_MS": str(deliver_ms)}))
            await _dispatched(indexer, tmp_path)
            out_ms = deliver_ms // 1000 * 1000
            assert await timers.run_pass(now_ms=out_ms - 2000) == (6, 0)
            while timers.store.flushed_position < timers.store.written_position:
                await asyncio.sleep(0.01)
            timers.checkpoint()
            assert TimerCheckpoint(tmp_path).read().last_timer_queue_offset == 6
            timers._deliveries_per_pass_max = 4
            assert await timers.run_pass(now_ms=out_ms + 1000) == (0, 4)
            # no checkpoint after the deliveries: a crash here
        async with _writer_and_indexer(tmp_path) as (_, timers, indexer):
            assert timers.queue_offset == 6
            assert await timers.run_pass(now_ms=out_ms + 2000) == (0, 6)
            assert timers.duplicates_skipped_total == 4
            assert timers.delivered_total == 2
            await _dispatched(indexer, tmp_path)
            assert [message["body"] for message in _queue(tmp_path, "Orders", 3)] == \
                [f"m{index}" for index in range(6)]

    run(scenario)


def test_a_slot_delivers_each_message_at_its_own_time_in_time_order(tmp_path: Path) -> None:
    """Three sends into one slot, the latest asked first: each comes at the time asked (not
    at the slot's end, as on RocketMQ), soonest first."""
    async def scenario() -> None:
        async with _writer_and_indexer(tmp_path) as (server, timers, indexer):
            slot_ms = (int(time.time() * 1000) // 1000 + 5) * 1000
            asked = {"late": slot_ms + 900, "early": slot_ms + 100, "middle": slot_ms + 500}
            for body, deliver_ms in asked.items():
                await server.store(_send("Orders", 1, body.encode(), {
                    "UNIQ_KEY": body, "TIMER_DELIVER_MS": str(deliver_ms)}))
            await _dispatched(indexer, tmp_path)
            assert await timers.run_pass(now_ms=slot_ms - 2000) == (3, 0)
            assert await timers.run_pass(now_ms=slot_ms) == (0, 0)
            assert timers.next_due_ms == asked["early"]
            assert await timers.run_pass(now_ms=asked["early"]) == (0, 1)
            assert await timers.run_pass(now_ms=asked["middle"] - 1) == (0, 0)
            assert timers.next_due_ms == asked["middle"]
            assert await timers.run_pass(now_ms=asked["late"]) == (0, 2)
            await _dispatched(indexer, tmp_path)
            delivered = _queue(tmp_path, "Orders", 1)
        assert [(m["body"], m["TIMER_DEQUEUE_MS"]) for m in delivered] == [
            ("early", str(asked["early"])), ("middle", str(asked["late"])),
            ("late", str(asked["late"]))]

    run(scenario)


def test_a_send_into_the_slot_under_way_waits_for_its_time_in_the_enqueue(
        tmp_path: Path) -> None:
    """Once a slot has begun its units are taken: a later send for it is not filed there
    (it would be missed) but goes out from the enqueue when due."""
    async def scenario() -> None:
        async with _writer_and_indexer(tmp_path) as (server, timers, indexer):
            slot_ms = (int(time.time() * 1000) // 1000 + 5) * 1000
            await server.store(_send("Orders", 2, b"first", {
                "TIMER_DELIVER_MS": str(slot_ms + 800)}))
            await _dispatched(indexer, tmp_path)
            assert await timers.run_pass(now_ms=slot_ms - 1000) == (1, 0)
            assert await timers.run_pass(now_ms=slot_ms + 10) == (0, 0)  # the slot is taken
            await server.store(_send("Orders", 2, b"late", {
                "TIMER_DELIVER_MS": str(slot_ms + 300)}))
            await _dispatched(indexer, tmp_path)
            assert await timers.run_pass(now_ms=slot_ms + 20) == (0, 0)
            assert timers.next_due_ms == slot_ms + 300
            assert timers.queue_offset == 1  # waits, not filed in the taken slot
            assert await timers.run_pass(now_ms=slot_ms + 300) == (1, 0)  # out from enqueue
            assert await timers.run_pass(now_ms=slot_ms + 800) == (0, 1)
            assert await timers.run_pass(now_ms=slot_ms + 1000) == (0, 0)
            assert timers.pending() == 0
            await _dispatched(indexer, tmp_path)
            delivered = _queue(tmp_path, "Orders", 2)
        assert [m["body"] for m in delivered] == ["late", "first"]

    run(scenario)
