"""Consume throughput over HTTP with 72 and 600 queues, beside Redis Streams with 72 and 600.

    .venv/bin/python bench/http_consume.py [--messages 144000] [--runs 2] [--connections 8]

Defaults take about 2 minutes.  RocketMQ issue #3585, part J (pull request #3657): RocketMQ's
consume rate fell from 200k to 110k msg/s going from 72 to 600 queues; the target here is that
600 queues reach at least 0.8 of the 72-queue rate, over HTTP, through the notifier.
(bench/consume.py measures the same in-process, against the engine alone.)

Setup, untimed: mqstore's indexer, writer and notifier as processes (harness.py; the writer
allows 600 queues per topic), and `--messages` 1 KiB messages in each of two topics,
"Bench72" and "Bench600", message i to queue i % Q, sent as binary batches of 256; then wait
until the notifier lists them all.  Redis: one redis-server (`appendfsync everysec`) with
streams "Bench72:q" and "Bench600:q" filled the same way with pipelined XADDs.

Timed, reading every message of a topic from the start (reads do not consume, so each run
reads the same messages again; run 0 is a discarded warm-up; cases interleave per run):
  mqstore pull-32     `--connections` workers take queues round robin and pull each from its
                      offset, 32 messages at a time (RocketMQ's pull batch), wait_ms=0; every
                      body is base64-decoded, as a consumer would
  mqstore group-256   one `mqstore.client.AsyncConsumer` polling 256 at a time (the group
                      poll spreads each poll over the queues)
  redis xrange-32     the same workers: `XRANGE stream (last-id + COUNT 32` (redis-py, hiredis)
  redis xread-32      one client: `XREAD COUNT 32 STREAMS` every stream from its last id
Printed: msg/s, median of `--runs` (min–max), the CPU time per message of the server
process(es) and of this client process, and the 600/72 ratios (also per run, paired).
JSON goes to bench/results/http_consume-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import harness
import hiredis
import redis.asyncio
import redis_peer
from harness import BODY

from mqstore.client import AsyncConsumer, OutgoingMessage
from mqstore.services.common.http.batch_wire import BATCH_MEDIA_TYPE, BatchCodec

QUEUE_COUNTS = (72, 600)
PRODUCE_BATCH = 256
PULL_MESSAGES = 32
POLL_MESSAGES = 256
DISPATCH_WAIT_S = 600.0


def topic_of(queues: int) -> str:
    return f"Bench{queues}"


# -- mqstore --------------------------------------------------------------------------------
async def produce_mqstore(url: str, queues: int, count: int) -> None:
    topic = topic_of(queues)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=4)) as session:
        starts = collections.deque(range(0, count, PRODUCE_BATCH))

        async def worker() -> None:
            while starts:
                start = starts.popleft()
                batch = BatchCodec.encode(
                    [OutgoingMessage(topic, BODY, queue_id=i % queues)
                     for i in range(start, min(start + PRODUCE_BATCH, count))])
                async with session.post(f"{url}/v1/batch", data=batch,
                                        headers={"Content-Type": BATCH_MEDIA_TYPE}) as answer:
                    assert answer.status == 200, await answer.text()

        await asyncio.gather(*(worker() for _ in range(4)))


async def await_dispatched(url: str, queues: int, count: int) -> None:
    """Until the notifier lists `count` messages over `queues` queues of the topic."""
    deadline = time.monotonic() + DISPATCH_WAIT_S
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(f"{url}/v1/topics/{topic_of(queues)}/queues") as answer:
                listed = (await answer.json())["queues"]
            if len(listed) == queues and sum(q["max_offset"] for q in listed) == count:
                return
            assert time.monotonic() < deadline, f"not dispatched in {DISPATCH_WAIT_S} s"
            await asyncio.sleep(0.1)


async def round_robin(queues: int, connections: int,
                      read: Callable[[int], Awaitable[tuple[int, bool]]]) -> int:
    """`connections` workers taking queues in turn; `read(q)` returns (messages, more)."""
    pending = collections.deque(range(queues))
    received = 0

    async def worker() -> None:
        nonlocal received
        while pending:
            queue_id = pending.popleft()
            messages, more = await read(queue_id)
            received += messages
            if more:
                pending.append(queue_id)

    await asyncio.gather(*(worker() for _ in range(connections)))
    return received


async def pull_all(url: str, queues: int, connections: int) -> int:
    topic = topic_of(queues)
    offsets = [0] * queues
    async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections)) as session:

        async def read(queue_id: int) -> tuple[int, bool]:
            params = {"offset": offsets[queue_id], "max_messages": PULL_MESSAGES}
            async with session.get(f"{url}/v1/topics/{topic}/queues/{queue_id}/messages",
                                   params=params) as answer:
                document = json.loads(await answer.read())
            for message in document["messages"]:
                base64.b64decode(message["body_base64"])
            offsets[queue_id] = document["next_offset"]
            return len(document["messages"]), document["next_offset"] < document["max_offset"]

        return await round_robin(queues, connections, read)


async def poll_all(url: str, queues: int, count: int) -> int:
    received = 0
    async with AsyncConsumer(url, "consume-bench", topic_of(queues)) as consumer:
        while received < count:
            messages = await consumer.poll(max_messages=POLL_MESSAGES, wait_ms=0)
            assert messages, f"a poll found nothing after {received} of {count}"
            received += len(messages)
    return received


# -- Redis ----------------------------------------------------------------------------------
def stream_names(queues: int) -> list[bytes]:
    return [f"{topic_of(queues)}:{queue_id}".encode() for queue_id in range(queues)]


async def produce_redis(port: int, queues: int, count: int) -> None:
    streams = stream_names(queues)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    parser = hiredis.Reader()
    for start in range(0, count, PRODUCE_BATCH):
        size = min(PRODUCE_BATCH, count - start)
        writer.write(b"".join(redis_peer.resp_command(b"XADD", streams[i % queues], b"*",
                                                      redis_peer.FIELD, BODY)
                              for i in range(start, start + size)))
        await redis_peer.read_replies(reader, parser, size)
    writer.close()
    await writer.wait_closed()


async def xrange_all(port: int, queues: int, connections: int) -> int:
    streams = stream_names(queues)
    last_ids: list[bytes] = [b"-"] * queues
    client = redis.asyncio.Redis(host="127.0.0.1", port=port, max_connections=connections)
    try:
        async def read(queue_id: int) -> tuple[int, bool]:
            start = last_ids[queue_id]
            entries = await client.xrange(streams[queue_id],
                                          start if start == b"-" else b"(" + start,
                                          count=PULL_MESSAGES)
            for _, fields in entries:
                assert len(fields[redis_peer.FIELD]) == len(BODY)
            if entries:
                last_ids[queue_id] = entries[-1][0]
            return len(entries), len(entries) == PULL_MESSAGES

        return await round_robin(queues, connections, read)
    finally:
        await client.aclose()


async def xread_all(port: int, queues: int, count: int) -> int:
    last_ids: dict[bytes, bytes | str] = dict.fromkeys(stream_names(queues), "0-0")
    received = 0
    client = redis.asyncio.Redis(host="127.0.0.1", port=port)
    try:
        while received < count:
            answer = await client.xread(last_ids, count=PULL_MESSAGES)
            assert answer, f"XREAD found nothing after {received} of {count}"
            for stream, entries in answer:
                received += len(entries)
                last_ids[stream] = entries[-1][0]
        return received
    finally:
        await client.aclose()


# -- measuring ------------------------------------------------------------------------------
def timed(read: Callable[[], Awaitable[int]], count: int,
          server_cpu: Callable[[], float]) -> dict[str, float]:
    """One read of every message: msg/s and CPU µs per message (server, this client)."""
    server_s, client_s, started = server_cpu(), harness.own_cpu_seconds(), time.monotonic()
    received = asyncio.run(read())
    elapsed = time.monotonic() - started
    assert received == count, f"read {received} of {count}"
    return {"msg_per_s": count / elapsed,
            "server_cpu_us_per_msg": 1e6 * (server_cpu() - server_s) / count,
            "client_cpu_us_per_msg": 1e6 * (harness.own_cpu_seconds() - client_s) / count}


def measure_mqstore(arguments: argparse.Namespace) -> dict[tuple[str, int], list[dict]]:
    n, connections = arguments.messages, arguments.connections
    services = harness.MqstoreServices(store={"segment_size_bytes": 256 << 20},
                                       writer={"topic_queue_count": max(QUEUE_COUNTS)})
    with harness.running(services):
        writer, notifier = services.url("writer"), services.url("notifier")
        for queues in QUEUE_COUNTS:
            asyncio.run(produce_mqstore(writer, queues, n))
            asyncio.run(await_dispatched(notifier, queues, n))
        print(f"mqstore: {n:,} messages in each of {QUEUE_COUNTS} queues, dispatched",
              flush=True)

        def cpu() -> float:
            return services.cpu_seconds()["notifier"]

        cases: dict[str, Callable[[int], Callable[[], Awaitable[int]]]] = {
            "pull-32": lambda q: lambda: pull_all(notifier, q, connections),
            "group-256": lambda q: lambda: poll_all(notifier, q, n)}
        return _runs(cases, cpu, arguments)


def measure_redis(arguments: argparse.Namespace) -> dict[tuple[str, int], list[dict]]:
    n, connections = arguments.messages, arguments.connections
    with redis_peer.running_redis(appendfsync="everysec") as server:
        for queues in QUEUE_COUNTS:
            asyncio.run(produce_redis(server.port, queues, n))
        print(f"redis: {n:,} entries in each of {QUEUE_COUNTS} stream sets", flush=True)
        cases: dict[str, Callable[[int], Callable[[], Awaitable[int]]]] = {
            "xrange-32": lambda q: lambda: xrange_all(server.port, q, connections),
            "xread-32": lambda q: lambda: xread_all(server.port, q, n)}
        return _runs(cases, server.cpu_seconds, arguments)


def _runs(cases: dict[str, Callable[[int], Callable[[], Awaitable[int]]]],
          server_cpu: Callable[[], float], arguments: argparse.Namespace
          ) -> dict[tuple[str, int], list[dict]]:
    measured: dict[tuple[str, int], list[dict]] = {
        (case, q): [] for case in cases for q in QUEUE_COUNTS}
    for run in range(arguments.runs + 1):  # run 0 is the discarded warm-up
        for (case, queues), runs in measured.items():
            figures = timed(cases[case](queues), arguments.messages, server_cpu)
            if run:
                runs.append(figures)
    return measured


def report(target: str, measured: dict[tuple[str, int], list[dict]]) -> list[dict[str, Any]]:
    rows = []
    for (case, queues), runs in measured.items():
        rates = [run["msg_per_s"] for run in runs]
        row = {"target": target, "case": case, "queues": queues,
               "msg_per_s": harness.summary(rates),
               **{key: statistics.median(run[key] for run in runs)
                  for key in ("server_cpu_us_per_msg", "client_cpu_us_per_msg")},
               "runs": runs}
        print(f"{target:<15}{case:<11}{queues:>6}{row['msg_per_s']['median']:>10,.0f}"
              f"{f'{min(rates):,.0f}–{max(rates):,.0f}':>19}"
              f"{row['server_cpu_us_per_msg']:>15.1f}{row['client_cpu_us_per_msg']:>15.1f}",
              flush=True)
        rows.append(row)
    low, high = QUEUE_COUNTS
    for case in dict.fromkeys(case for case, _ in measured):
        low_rates = [run["msg_per_s"] for run in measured[case, low]]
        high_rates = [run["msg_per_s"] for run in measured[case, high]]
        paired = [b / a for a, b in zip(low_rates, high_rates, strict=True)]
        ratio = statistics.median(high_rates) / statistics.median(low_rates)
        print(f"{target} {case}: {high}/{low} = {ratio:.2f} (paired per run "
              f"{min(paired):.2f}–{max(paired):.2f})", flush=True)
        rows.append({"target": target, "case": case, "ratio": ratio, "paired": paired})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=144_000, help="per queue count")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--targets", nargs="+", choices=["mqstore", "redis"],
                        default=["mqstore", "redis"])
    arguments = parser.parse_args()
    harness.install_uvloop()
    conditions = harness.Conditions.now()
    print(conditions.describe(), flush=True)
    measured = {"mqstore": measure_mqstore, "redis": measure_redis}
    results = {target: measured[target](arguments) for target in arguments.targets}
    print(f"{'target':<15}{'case':<11}{'queues':>6}{'msg/s':>10}{'min–max':>19}"
          f"{'server µs/msg':>15}{'client µs/msg':>15}")
    rows = [row for target, figures in results.items() for row in report(target, figures)]
    conditions.finish()
    print(conditions.describe())
    print(f"results: {harness.write_results('http_consume', conditions, vars(arguments), rows)}")


if __name__ == "__main__":
    main()
