"""A writer with its delay schedule, for tests/services/test_delay_kill9.py to kill -9.

    delay_child.py DIRECTORY COUNT     produce COUNT delayed messages, then deliver
    delay_child.py DIRECTORY 0         deliver what is pending, then close cleanly

A writer store, an indexer and the delay schedule in one process (as
tests/services/test_delay_schedule.py runs them), on the real clock, with the table
"1s 2s 3s".  The messages ask for level 1, each with its own UNIQ_KEY, to topic `Orders`
queue 0.  One delivery per pass and a short persist interval make deliveries and saved
progress interleave, so the kill lands between two saves.  The child prints
{"delivered": n} as deliveries go on; with COUNT 0 it prints {"done": n, "recognised": r}
once nothing is pending and exits after a clean close.
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
from mqstore.services.writer.delay_schedule import DelaySchedule
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.storage import MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.format.properties import encode_properties
from tests.storage.dispatch.split_helpers import indexer_config, writer_config

LEVELS = "1s 2s 3s"
SETTINGS = WriterSettings(forward_port=0, topic_queue_count=4, delay_pass_interval_ms=5,
                          delay_deliveries_per_pass_max=1,
                          delay_offsets_persist_interval_ms=150)


def _say(**fields: int) -> None:
    print(json.dumps(fields), flush=True)


async def main(directory: Path, count: int) -> None:
    writer = MessageStore.open(directory, writer_config(flush_pages_min=0,
                                                        message_delay_levels=LEVELS))
    indexer = Indexer.open(directory, indexer_config(message_delay_levels=LEVELS))
    core = create_app(writer, SETTINGS)[PRODUCE]
    server = ForwardServer(core, SETTINGS)
    now_ms = int(time.time() * 1000)
    for index in range(count):
        answer = await server.store(ForwardRequest(
            index, KIND_SINGLE, 0, 0, 0, now_ms, 0, "10.0.0.1:5000", "Orders",
            encode_properties({"UNIQ_KEY": f"U{index:05d}", "DELAY": "1"}), b"m%d" % index))
        assert answer.status == "PUT_OK", answer
    schedule = DelaySchedule(core, writer, SETTINGS)
    schedule.start()
    while True:
        await asyncio.sleep(0.01)
        _say(delivered=schedule.delivered_total)
        if count == 0 and time.time() * 1000 > now_ms + 1500 and not schedule.pending():
            break
    await schedule.stop()
    indexer.close()
    writer.close()
    schedule.persist_after_close(clean=writer.failure is None)
    _say(done=schedule.delivered_total, recognised=schedule.recognised_total)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
