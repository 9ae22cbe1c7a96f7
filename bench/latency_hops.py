"""Where mqstore's produce→consume latency goes, hop by hop, at a low fixed rate.

    .venv/bin/python bench/latency_hops.py [--rate 100] [--seconds 10]     # about 20 s

mqstore's three services as processes (harness.py).  One producer sends single 1 KiB JSON
messages to queue 0 of one topic at `--rate`; one consumer long-polls queue 0 through the
notifier; a subscriber of the indexer's notice stream (as a notifier subscribes) runs on the
same uvloop; and a separate process polls the writer's `positions` file every 50 µs.  All
stamp CLOCK_MONOTONIC.  Per message (the first second is a warm-up):

    answered    send → the writer's answer reached the producer
    published   send → `positions` showed a committed position past the record
    noticed     published → the indexer's "advanced" line covering its queue offset arrived
    received    noticed → the consumer read the pull answer holding it
    total       send → received

Printed: p50, p99 and max of each, in ms, and the load average; JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import multiprocessing
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
import harness
from harness import BODY

from mqstore.storage.files.watermarks import PositionsFile

TOPIC = "Hops"
POLL_INTERVAL_S = 50e-6


def poll_positions(path: str, connection: Connection) -> None:
    """Every committed position the writer publishes, with when it was first seen."""
    while not Path(path).exists():
        time.sleep(0.01)
    positions = PositionsFile(Path(path), writable=False)
    seen: list[tuple[int, int]] = []
    connection.send("ready")
    while not connection.poll():
        read = positions.read()
        if read is not None and (not seen or read[1]["committed_position"] != seen[-1][0]):
            seen.append((read[1]["committed_position"], time.monotonic_ns()))
        time.sleep(POLL_INTERVAL_S)
    connection.send(seen)


async def follow_notices(indexer_url: str, noticed: list[tuple[int, int]]) -> None:
    async with aiohttp.ClientSession() as session, \
            session.get(f"{indexer_url}/v1/notices") as answer:
        while line := await answer.content.readline():
            arrived_ns = time.monotonic_ns()
            notice = json.loads(line)
            for topic, queue_id, next_offset in notice.get("queues", []):
                if notice["type"] == "advanced" and topic == TOPIC and queue_id == 0:
                    noticed.append((next_offset, arrived_ns))


async def consume(notifier_url: str, received: dict[int, int], count: int) -> None:
    url = f"{notifier_url}/v1/topics/{TOPIC}/queues/0/messages"
    offset = 0
    async with aiohttp.ClientSession() as session:
        while len(received) < count:
            params = {"offset": offset, "max_messages": 32, "wait_ms": 1000}
            async with session.get(url, params=params) as answer:
                document = json.loads(await answer.read())
            arrived_ns = time.monotonic_ns()
            for message in document["messages"]:
                received.setdefault(message["queue_offset"], arrived_ns)
            offset = document["next_offset"]


async def produce(writer_url: str, rate: int, count: int) -> list[dict[str, int]]:
    sent = []
    url = f"{writer_url}/v1/topics/{TOPIC}/messages"
    data = json.dumps({"body": BODY.decode(), "queue_id": 0}).encode()
    async with aiohttp.ClientSession() as session:
        started = time.monotonic()
        for seq in range(count):
            delay = started + seq / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            sent_ns = time.monotonic_ns()
            async with session.post(url, data=data,
                                    headers={"Content-Type": "application/json"}) as answer:
                result = json.loads(await answer.read())
            sent.append({"sent_ns": sent_ns, "answered_ns": time.monotonic_ns(),
                         "queue_offset": result["queue_offset"],
                         "physical_offset": result["physical_offset"]})
    return sent


async def run(services: harness.MqstoreServices, rate: int, count: int
              ) -> tuple[list[dict[str, int]], list[tuple[int, int]], dict[int, int]]:
    noticed: list[tuple[int, int]] = []
    received: dict[int, int] = {}
    follower = asyncio.create_task(follow_notices(services.url("indexer"), noticed))
    consumer = asyncio.create_task(consume(services.url("notifier"), received, count))
    await asyncio.sleep(0.5)  # the stream's snapshot and the first held pull are in place
    sent = await produce(services.url("writer"), rate, count)
    await asyncio.wait_for(consumer, 30)
    follower.cancel()
    await asyncio.gather(follower, return_exceptions=True)
    return sent, noticed, received


def hops(sent: list[dict[str, int]], published: list[tuple[int, int]],
         noticed: list[tuple[int, int]], received: dict[int, int]) -> dict[str, list[float]]:
    """Per hop, the ms of every message (see the module docstring)."""
    committed = [position for position, _ in published]
    notice_offsets = [next_offset for next_offset, _ in noticed]
    figures: dict[str, list[float]] = {name: [] for name in (
        "answered", "published", "noticed", "received", "total")}
    for message in sent:
        published_ns = published[bisect.bisect_right(committed, message["physical_offset"])][1]
        noticed_ns = noticed[bisect.bisect_right(notice_offsets, message["queue_offset"])][1]
        received_ns = received[message["queue_offset"]]
        for name, ns in (("answered", message["answered_ns"] - message["sent_ns"]),
                         ("published", published_ns - message["sent_ns"]),
                         ("noticed", noticed_ns - published_ns),
                         ("received", received_ns - noticed_ns),
                         ("total", received_ns - message["sent_ns"])):
            figures[name].append(ns / 1e6)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    arguments = parser.parse_args()
    harness.install_uvloop()
    conditions = harness.Conditions.now()
    print(conditions.describe(), flush=True)
    count, warmup = int(arguments.rate * (arguments.seconds + 1)), arguments.rate
    services = harness.MqstoreServices(store={"segment_size_bytes": 256 << 20})
    context = multiprocessing.get_context("spawn")
    with harness.running(services):
        poller_end, here = context.Pipe()
        path = str(services.data_dir / "positions")
        poller = context.Process(target=poll_positions, args=(path, poller_end))
        poller.start()
        assert here.poll(30) and here.recv() == "ready"
        sent, noticed, received = asyncio.run(run(services, arguments.rate, count))
        here.send("stop")
        published = here.recv()
        poller.join(10)
    figures = hops(sent[warmup:], published, noticed, received)
    conditions.finish()
    rows: list[dict[str, Any]] = []
    print(f"{arguments.rate} msg/s, {len(sent) - warmup} messages measured")
    print(f"{'hop':<11}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}")
    for name, values in figures.items():
        p50, p99, most = harness.percentiles(values, (50, 99, 100))
        print(f"{name:<11}{p50:>8.2f}{p99:>8.2f}{most:>8.2f}")
        rows.append({"hop": name, "p50_ms": p50, "p99_ms": p99, "max_ms": most})
    print(conditions.describe())
    print(f"results: {harness.write_results('latency_hops', conditions, vars(arguments), rows)}")


if __name__ == "__main__":
    main()
