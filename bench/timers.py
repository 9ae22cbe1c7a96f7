"""Timer messages on the embedded defaults: 1,000,000 pending, and how late they fire.

    .venv/bin/python bench/timers.py [--pending 1000000 --firing 20000 --dir DIR]

A writer store, an indexer and the writer's timer schedule in one process, as the writer
service runs them (services/writer/timer_schedule.py), with `WriterSettings()` defaults
(precision 1 s, 100 MiB timerlog files, 20,000 enqueues a pass).

  pending  `--pending` sends, each through the writer's produce core (the timer rewrite,
           then the put), due at random times over the next 2.5 days; then the schedule's
           passes enqueue them into the wheel.  Reported: produce and enqueue rates, the
           process's RSS before and after the enqueue (the wheel and timerlog are mapped
           files: their pages are the kernel's page cache, counted in RSS only while
           resident), the files' sizes.
  firing   `--firing` sends, each due 5-15 s after it is sent, the schedule running on the
           real clock.  Reported: lateness = the delivered copy's store time - the time
           the sender asked for (TIMER_DELIVER_MS), p50/p99/max, and the same from the end
           of the message's slot (TIMER_OUT_MS + precision, when the wheel fires it).

Results go to stdout as one JSON object (and to bench/results/timers-<time>.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.app import PRODUCE, create_app
from mqstore.services.writer.produce import ProduceCore
from mqstore.services.writer.run import writer_store_config
from mqstore.services.writer.timer_schedule import TimerSchedule
from mqstore.storage import Message, MessageStore, PutStatus, StoreConfig
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.format.properties import encode_properties

SETTINGS = WriterSettings(forward_port=0)
WRITER = writer_store_config(StoreConfig())
INDEXER = StoreConfig(queue_flush_interval_ms=20, queue_flush_thorough_interval_ms=50)
"""The schedule reads the timer queue as far as the indexer's `dispatched` file vouches;
written at each queue flush, so flushed often here, as the split tests do."""
DAY_MS = 86_400_000


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _send(core: ProduceCore, index: int, deliver_ms: int) -> None:
    message = Message("Orders", index % 4, b"x" * 100, properties_encoded=encode_properties(
        {"UNIQ_KEY": f"U{index:08d}", "TIMER_DELIVER_MS": str(deliver_ms)}),
        born_host="10.0.0.1:5000", born_timestamp_ms=deliver_ms)
    stored = core.delayed([message], batch=False)
    (result,) = await core.put(stored)
    while result.status is PutStatus.CREATE_MAPPED_FILE_FAILED:  # the first segment's
        await asyncio.sleep(0.05)                                 # preallocation
        (result,) = await core.put(stored)
    assert result.ok, result.status


async def _wait_dispatched(indexer: Indexer, store: MessageStore) -> None:
    while indexer.dispatched_position < store.written_position:
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.5)  # the indexer's `dispatched` file follows


async def _pending(directory: Path, count: int) -> dict[str, float]:
    store = MessageStore.open(directory / "pending", WRITER)
    indexer = Indexer.open(directory / "pending", INDEXER)
    core = create_app(store, SETTINGS)[PRODUCE]
    timers = TimerSchedule(core, store, SETTINGS)
    rng = random.Random(1)
    now_ms = int(time.time() * 1000)
    started = time.perf_counter()
    for index in range(count):
        await _send(core, index, now_ms + 60_000 + rng.randrange(DAY_MS * 5 // 2))
    produce_s = time.perf_counter() - started
    await _wait_dispatched(indexer, store)
    rss_before = _rss_mib()
    started = time.perf_counter()
    enqueued = 0
    while enqueued < count:
        moved, _ = await timers.run_pass(now_ms=now_ms)
        assert moved > 0
        enqueued += moved
    enqueue_s = time.perf_counter() - started
    rss_after = _rss_mib()
    pending = timers.pending()
    await timers.stop()
    indexer.close()
    store.close()
    timers.persist_after_close(clean=True)
    timerlog_bytes = sum(path.stat().st_blocks * 512
                         for path in (directory / "pending" / "timerlog").iterdir())
    wheel = directory / "pending" / "timerwheel"
    return {"pending": pending, "produce_per_s": count / produce_s,
            "enqueue_per_s": count / enqueue_s, "rss_mib_before_enqueue": rss_before,
            "rss_mib_after_enqueue": rss_after, "timerlog_disk_mib": timerlog_bytes / 2**20,
            "timerwheel_disk_mib": wheel.stat().st_blocks * 512 / 2**20}


def _percentiles(values: list[int]) -> dict[str, float]:
    ordered = sorted(values)
    def at(q: float) -> float:
        return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])
    return {"p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": float(ordered[-1]),
            "min_ms": float(ordered[0])}


async def _firing(directory: Path, count: int) -> dict[str, object]:
    store = MessageStore.open(directory / "firing", WRITER)
    indexer = Indexer.open(directory / "firing", INDEXER)
    core = create_app(store, SETTINGS)[PRODUCE]
    timers = TimerSchedule(core, store, SETTINGS)
    timers.start()
    rng = random.Random(2)
    for index in range(count):  # due 5-15 s after its send: never stored at once
        await _send(core, index, int(time.time() * 1000) + 5_000 + rng.randrange(10_000))
    while timers.delivered_total < count:
        await asyncio.sleep(0.2)
        print(f"firing: {timers.delivered_total} of {count} delivered", file=sys.stderr,
              flush=True)
    await timers.stop()
    late, late_slot = [], []
    for message in store.iter_messages():
        if message.topic == "Orders":
            asked = int(message.properties["TIMER_DELIVER_MS"])
            slot_end = int(message.properties["TIMER_OUT_MS"]) + SETTINGS.timer_precision_ms
            late.append(message.store_timestamp_ms - asked)
            late_slot.append(message.store_timestamp_ms - slot_end)
    indexer.close()
    store.close()
    timers.persist_after_close(clean=True)
    return {"delivered": len(late), "after_asked": _percentiles(late),
            "after_slot_end": _percentiles(late_slot)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument("--firing", type=int, default=20_000)
    parser.add_argument("--dir", type=Path, default=None)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=arguments.dir) as directory:
        result = {"firing": asyncio.run(_firing(Path(directory), arguments.firing)),
                  "pending": asyncio.run(_pending(Path(directory), arguments.pending))}
    text = json.dumps(result, indent=1)
    print(text)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    Path(__file__).parent.joinpath("results", f"timers-{stamp}.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
