"""The remoting front: sends through both hops, and pulls with and without a hop.

    .venv/bin/python bench/remoting.py [--seconds 5] [--runs 3] [--senders 16]
                                       [--preload 100000]

The three services run as processes (harness.MqstoreServices, async flush, uvloop); the
load comes from asyncio clients in this process (tests/remoting/client.py) on 127.0.0.1.
Cases, 1 KiB bodies:

  send-1        SEND_MESSAGE_V2, one message per request, `--senders` in flight over 4
                connections: client → front (notifier) → writer's forward listener
  http-send-1   POST /v1/topics/{t}/messages to the writer, the same concurrency: one hop,
                the HTTP API's own single-message path, for comparison
  pull-32       PULL_MESSAGE of 32 from offset 0 of every queue (the preloaded messages):
                served in the notifier's process from its store view, no hop
  http-pull-32  GET the notifier's /v1/topics/{t}/queues/{q}/messages of 32: the read a
                front in a process of its own (RocketMQ 5's proxy) would make per pull,
                before re-encoding the JSON answer into records

Printed: msg/s (median of the runs, min–max) and the server processes' CPU µs per message
(writer + indexer + notifier, user + system from /proc).  The design choice in
docs/remoting.md cites these.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import harness
from harness import BODY

sys.path.append(str(Path(__file__).parents[1]))
from mqstore.services.notifier.remoting import codes
from tests.remoting.client import (
    RemotingClient,
    batch_body,
    properties,
    send_header,
)

TOPIC = "BenchRemoting"
QUEUES = 8
STORE = {"flush_mode": "async"}
CASES = ("send-1", "http-send-1", "pull-32", "http-pull-32")


async def _send_1(services: harness.MqstoreServices, seconds: float, senders: int) -> int:
    clients = [await RemotingClient.connect(services.remoting_address) for _ in range(4)]
    deadline = time.monotonic() + seconds
    counts = [0] * senders

    async def sender(index: int) -> None:
        client = clients[index % len(clients)]
        while time.monotonic() < deadline:
            props = properties(UNIQ_KEY=f"{index:08X}{counts[index]:024X}", WAIT="true")
            answer = await client.request(codes.SEND_MESSAGE_V2,
                                          send_header(TOPIC, counts[index] % QUEUES,
                                                      props=props), BODY)
            assert answer.code == codes.SUCCESS, answer.remark
            counts[index] += 1

    await asyncio.gather(*(sender(index) for index in range(senders)))
    for client in clients:
        await client.close()
    return sum(counts)


async def _http_send_1(services: harness.MqstoreServices, seconds: float, senders: int) -> int:
    url = f"{services.url('writer')}/v1/topics/{TOPIC}Http/messages"
    payload = json.dumps({"body": BODY.decode("ascii")}).encode()
    deadline = time.monotonic() + seconds
    counts = [0] * senders
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=senders)) as session:
        async def sender(index: int) -> None:
            while time.monotonic() < deadline:
                async with session.post(url, data=payload, headers={
                        "Content-Type": "application/json"}) as answer:
                    assert answer.status == 200, await answer.text()
                    await answer.read()
                counts[index] += 1

        await asyncio.gather(*(sender(index) for index in range(senders)))
    return sum(counts)


async def _preload(services: harness.MqstoreServices, count: int) -> None:
    client = await RemotingClient.connect(services.remoting_address)
    created = await client.request(codes.UPDATE_AND_CREATE_TOPIC, {
        "topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES),
        "perm": "6"})
    assert created.code == codes.SUCCESS, created.remark
    per_queue = count // QUEUES
    for queue_id in range(QUEUES):
        for start in range(0, per_queue, 256):
            entries = [(BODY, properties(UNIQ_KEY=f"{queue_id:08X}{start + i:024X}"))
                       for i in range(min(256, per_queue - start))]
            answer = await client.request(codes.SEND_BATCH_MESSAGE, send_header(
                TOPIC, queue_id, props="WAIT\x01true\x02", batch=True), batch_body(entries))
            assert answer.code == codes.SUCCESS, answer.remark
    while True:  # until the indexer dispatched everything
        answer = await client.request(codes.GET_MAX_OFFSET, {"topic": TOPIC,
                                                             "queueId": str(QUEUES - 1)})
        if int(answer.ext_fields["offset"]) >= per_queue:
            break
        await asyncio.sleep(0.05)
    await client.close()


async def _pull_32(services: harness.MqstoreServices, per_queue: int) -> int:
    client = await RemotingClient.connect(services.remoting_address)

    async def queue(queue_id: int) -> int:
        offset, got = 0, 0
        while offset < per_queue:
            answer = await client.request(codes.PULL_MESSAGE, {
                "consumerGroup": "bench", "topic": TOPIC, "queueId": str(queue_id),
                "queueOffset": str(offset), "maxMsgNums": "32", "sysFlag": "4",
                "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
                "subVersion": "0", "expressionType": "TAG"})
            assert answer.code == codes.SUCCESS, (answer.code, answer.remark)
            got += int(answer.ext_fields["nextBeginOffset"]) - offset
            offset = int(answer.ext_fields["nextBeginOffset"])
        return got

    total = sum(await asyncio.gather(*(queue(queue_id) for queue_id in range(QUEUES))))
    await client.close()
    return total


async def _http_pull_32(services: harness.MqstoreServices, per_queue: int) -> int:
    base = f"{services.url('notifier')}/v1/topics/{TOPIC}/queues"
    async with aiohttp.ClientSession() as session:
        async def queue(queue_id: int) -> int:
            offset = 0
            while offset < per_queue:
                async with session.get(f"{base}/{queue_id}/messages",
                                       params={"offset": offset, "max_messages": 32}) as answer:
                    document = await answer.json()
                offset = document["next_offset"]
            return offset

        return sum(await asyncio.gather(*(queue(queue_id) for queue_id in range(QUEUES))))


def _measure(services: harness.MqstoreServices, run: Any) -> dict[str, Any]:
    before = services.cpu_seconds()
    started = time.monotonic()
    messages = asyncio.run(run)
    elapsed = time.monotonic() - started
    after = services.cpu_seconds()
    per_service = {name: (after[name] - before[name]) * 1e6 / messages for name in after}
    return {"messages": messages, "msg_per_s": messages / elapsed,
            "server_cpu_us_per_msg": sum(per_service.values()),
            "cpu_us_per_msg_by_service": per_service}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--senders", type=int, default=16)
    parser.add_argument("--preload", type=int, default=100_000)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    arguments = parser.parse_args()
    harness.install_uvloop()
    conditions = harness.Conditions.now()
    rows: list[dict[str, Any]] = []
    per_queue = arguments.preload // QUEUES
    chosen = set(arguments.cases)
    for run in range(arguments.runs):
        with harness.running(harness.MqstoreServices(store=STORE)) as services:
            asyncio.run(_preload(services, arguments.preload))
            cases = {
                "send-1": lambda: _send_1(services, arguments.seconds, arguments.senders),
                "http-send-1": lambda: _http_send_1(services, arguments.seconds,
                                                    arguments.senders),
                "pull-32": lambda: _pull_32(services, per_queue),
                "http-pull-32": lambda: _http_pull_32(services, per_queue)}
            for name, case in cases.items():
                if name not in chosen:
                    continue
                row = {"case": name, "run": run, **_measure(services, case())}
                rows.append(row)
                split = " ".join(f"{service} {value:.1f}" for service, value in
                                 row["cpu_us_per_msg_by_service"].items())
                print(f"run {run} {name:<13} {row['msg_per_s']:>9,.0f} msg/s "
                      f"{row['server_cpu_us_per_msg']:>6.1f} µs/msg ({split})", flush=True)
    conditions.finish()
    print(conditions.describe())
    print(f"{'case':<13} {'msg/s (median, min-max)':>28} {'server CPU µs/msg':>18}")
    for name in arguments.cases:
        picked = [row for row in rows if row["case"] == name]
        rates = [row["msg_per_s"] for row in picked]
        cpu = statistics.median(row["server_cpu_us_per_msg"] for row in picked)
        print(f"{name:<13} {statistics.median(rates):>12,.0f} ({min(rates):,.0f}–"
              f"{max(rates):,.0f}) {cpu:>18.1f}")
    print(harness.write_results("remoting", conditions, vars(arguments), rows))


if __name__ == "__main__":
    main()
