"""A writer with its timer schedule, for tests/services/test_timer_kill9.py to kill -9.

    timer_child.py DIRECTORY COUNT     produce COUNT timer messages, then deliver
    timer_child.py DIRECTORY 0         deliver what is pending, then close cleanly

A writer store, an indexer and the timer schedule in one process (as
tests/services/test_timer_schedule.py runs them), on the real clock.  The messages are due
over the 4 s after the next 2 s, each with its own UNIQ_KEY, to topic `Orders` queue 0.  A small
per-pass bound (`timer_deliveries_per_pass_max`) and a short flush interval make deliveries
and checkpoints interleave, so a kill lands mid-slot and between checkpoints.  The child
prints {"delivered": n} as deliveries go on; with COUNT 0 it prints {"done": n} once nothing
is pending and exits after a clean close.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from mqstore.services.common.links.forward_wire import KIND_SINGLE, ForwardRequest
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.app import PRODUCE, create_app
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.services.writer.timer_schedule import TimerSchedule
from mqstore.storage import MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.format.properties import encode_properties
from tests.storage.dispatch.split_helpers import indexer_config, writer_config

SETTINGS = WriterSettings(forward_port=0, topic_queue_count=4,
                          timer_log_file_size_bytes=1 << 20, timer_flush_interval_ms=150,
                          timer_pass_interval_ms=5, timer_deliveries_per_pass_max=2)


def _say(**fields: int) -> None:
    print(json.dumps(fields), flush=True)


async def main(directory: Path, count: int) -> None:
    writer = MessageStore.open(directory, writer_config(flush_pages_min=0))
    indexer = Indexer.open(directory, indexer_config())
    core = create_app(writer, SETTINGS)[PRODUCE]
    server = ForwardServer(core, SETTINGS)
    timers = TimerSchedule(core, writer, SETTINGS)
    now_ms = int(time.time() * 1000)
    for index in range(count):
        properties = {"UNIQ_KEY": f"U{index:05d}",
                      "TIMER_DELIVER_MS": str(now_ms + 2000 + index * 4000 // max(1, count))}
        answer = await server.store(ForwardRequest(
            index, KIND_SINGLE, 0, 0, 0, now_ms, 0, "10.0.0.1:5000", "Orders",
            encode_properties(properties), b"m%d" % index))
        assert answer.status == "PUT_OK", answer
    timers.start()
    while True:
        await asyncio.sleep(0.01)
        _say(delivered=timers.delivered_total)
        if count == 0 and timers.pending() == 0:
            break
    await timers.stop()
    await asyncio.sleep(0.01)
    indexer.close()
    writer.close()
    timers.persist_after_close(clean=writer.failure is None)
    _say(done=timers.delivered_total, skipped=timers.duplicates_skipped_total)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
