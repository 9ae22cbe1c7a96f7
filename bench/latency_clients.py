"""The two client processes of bench/http_latency.py: a fixed-rate producer and a consumer.

Each runs in its own process (multiprocessing, spawn) on uvloop, so neither slows the other
and each one's CPU time is its own.  Both sides read the same clock: `time.monotonic_ns()`
is CLOCK_MONOTONIC, one clock for every process of the machine.

Producer: message `seq` is due at start + seq / rate; when due (or as soon after as the loop
gets to it) its body is stamped with `seq` and the send time, and it is sent on its own task
(at most `IN_FLIGHT_MAX` unanswered at once):

    body = b"%012d %020d " % (seq, send_ns) + filler     1024 printable bytes

Consumer: long-polls until every message arrived (or its deadline); each message's latency
is the time its answer was read minus the send time in its body.  Kinds:

    pull    mqstore notifier, one long-polled `GET .../queues/{q}/messages` loop per queue
            (max 32 messages, wait 1 s), as RocketMQ's push consumer pulls each queue
    group   mqstore notifier through `mqstore.client.AsyncConsumer.poll` (max 256, wait 1 s),
            committing every 5 s (RocketMQ's persistConsumerOffsetInterval) between polls
    xread   Redis: one `XREAD BLOCK 1000 COUNT 256` over the eight streams, from the last ids
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from typing import Any

import aiohttp
import harness
import redis.asyncio
from harness import BODY

from mqstore.client import AsyncConsumer

IN_FLIGHT_MAX = 64
QUEUES = 8
PULL_MESSAGES_MAX = 32
POLL_MESSAGES_MAX = 256
WAIT_MS = 1000
COMMIT_INTERVAL_S = 5.0
STREAMS = [f"Latency:{queue_id}" for queue_id in range(QUEUES)]
TOPIC = "Latency"
HEADER_BYTES = 34


@dataclasses.dataclass(frozen=True)
class Spec:
    """What both processes need to know about one measured point (picklable)."""

    consumer: str  # pull, group, xread
    rate_per_s: int
    count: int
    warmup_count: int
    deadline_s: float
    writer_url: str = ""
    notifier_url: str = ""
    redis_port: int = 0


def stamped(seq: int, send_ns: int) -> bytes:
    header = b"%012d %020d " % (seq, send_ns)
    assert len(header) == HEADER_BYTES
    return header + BODY[HEADER_BYTES:]


def produce_main(spec: Spec, connection: Connection) -> None:
    harness.install_uvloop()
    cpu_s = time.process_time()
    lateness_ms, elapsed_s = asyncio.run(_produce(spec))
    connection.send({"cpu_s": time.process_time() - cpu_s, "elapsed_s": elapsed_s,
                     "lateness_ms": harness.percentiles(lateness_ms, (50, 99, 100))})


async def _produce(spec: Spec) -> tuple[list[float], float]:
    """Send `spec.count` messages at `spec.rate_per_s`; (lateness of each in ms, seconds)."""
    async with Sender(spec) as send:
        slots = asyncio.Semaphore(IN_FLIGHT_MAX)
        pending: set[asyncio.Task[None]] = set()
        lateness_ms = []
        started = time.monotonic()
        for seq in range(spec.count):
            due = started + seq / spec.rate_per_s
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await slots.acquire()
            send_ns = time.monotonic_ns()
            lateness_ms.append(max(0.0, send_ns / 1e6 - due * 1e3))
            task = asyncio.create_task(send(seq, stamped(seq, send_ns)))
            pending.add(task)
            task.add_done_callback(lambda done: (pending.discard(done), slots.release()))
        await asyncio.gather(*pending)
        return lateness_ms, time.monotonic() - started


class Sender:
    """An async context giving `send(seq, body)` to the writer or to Redis."""

    def __init__(self, spec: Spec) -> None:
        self._spec = spec
        self._close: Callable[[], Awaitable[None]] | None = None

    async def __aenter__(self) -> Callable[[int, bytes], Awaitable[None]]:
        spec = self._spec
        if spec.redis_port:
            client = redis.asyncio.Redis(host="127.0.0.1", port=spec.redis_port,
                                         max_connections=IN_FLIGHT_MAX)
            self._close = client.aclose

            async def xadd(seq: int, body: bytes) -> None:
                await client.xadd(STREAMS[seq % QUEUES], {"b": body})

            return xadd
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=IN_FLIGHT_MAX))
        self._close = session.close
        url = f"{spec.writer_url}/v1/topics/{TOPIC}/messages"
        headers = {"Content-Type": "application/json"}

        async def post(seq: int, body: bytes) -> None:
            data = json.dumps({"body": body.decode()}).encode()
            async with session.post(url, data=data, headers=headers) as answer:
                await answer.read()
                if answer.status != 200:
                    raise RuntimeError(f"message {seq}: HTTP {answer.status}")

        return post

    async def __aexit__(self, *exc_info: object) -> None:
        if self._close is not None:
            await self._close()


class Receiver:
    """Latency of every message as it arrives; duplicates counted, not measured twice."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.latency_ns: dict[int, int] = {}
        self.duplicates = 0
        self.all_in = asyncio.Event()
        self.stopping = False

    def received(self, body: bytes, received_ns: int) -> None:
        seq, send_ns = int(body[:12]), int(body[13:33])
        if seq in self.latency_ns:
            self.duplicates += 1
            return
        self.latency_ns[seq] = received_ns - send_ns
        if len(self.latency_ns) == self.spec.count:
            self.all_in.set()

    def result(self) -> dict[str, Any]:
        measured = [ns / 1e6 for seq, ns in self.latency_ns.items()
                    if seq >= self.spec.warmup_count]
        return {"received": len(self.latency_ns), "duplicates": self.duplicates,
                "measured": len(measured),
                "latency_ms": harness.percentiles(measured, (50, 99, 100)) if measured else []}


def consume_main(spec: Spec, connection: Connection) -> None:
    harness.install_uvloop()
    cpu_s = time.process_time()
    result = asyncio.run(_consume(spec, connection))
    connection.send({**result, "cpu_s": time.process_time() - cpu_s})


async def _consume(spec: Spec, connection: Connection) -> dict[str, Any]:
    receiver = Receiver(spec)
    loops = {"pull": _pull_loops, "group": _group_loop, "xread": _xread_loop}[spec.consumer]
    ready = asyncio.Event()
    task = asyncio.create_task(loops(spec, receiver, ready))
    await ready.wait()
    connection.send("ready")
    all_in = asyncio.create_task(receiver.all_in.wait())
    await asyncio.wait({all_in, task}, timeout=spec.deadline_s,
                       return_when=asyncio.FIRST_COMPLETED)  # a timeout shows as received < count
    if task.done():
        task.result()  # the loops end only by failing: raise that here
    receiver.stopping = True  # each loop ends after its poll in progress (at most WAIT_MS)
    all_in.cancel()
    done, _ = await asyncio.wait({task}, timeout=WAIT_MS / 1000 + 5)
    if not done:
        task.cancel()
    return receiver.result()


async def _pull_loops(spec: Spec, receiver: Receiver, ready: asyncio.Event) -> None:
    async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=QUEUES)) as session:

        async def pull(queue_id: int, offset: int, wait_ms: int) -> int:
            url = f"{spec.notifier_url}/v1/topics/{TOPIC}/queues/{queue_id}/messages"
            params = {"offset": offset, "max_messages": PULL_MESSAGES_MAX, "wait_ms": wait_ms}
            async with session.get(url, params=params) as answer:
                data = await answer.read()
            received_ns = time.monotonic_ns()
            assert answer.status == 200, data
            document = json.loads(data)
            for message in document["messages"]:
                receiver.received(base64.b64decode(message["body_base64"]), received_ns)
            return int(document["next_offset"])

        offsets = [await pull(queue_id, 0, 0) for queue_id in range(QUEUES)]
        ready.set()

        async def follow(queue_id: int) -> None:
            while not receiver.stopping:
                offsets[queue_id] = await pull(queue_id, offsets[queue_id], WAIT_MS)

        await asyncio.gather(*(follow(queue_id) for queue_id in range(QUEUES)))


async def _group_loop(spec: Spec, receiver: Receiver, ready: asyncio.Event) -> None:
    async with AsyncConsumer(spec.notifier_url, "latency-bench", TOPIC) as consumer:
        await consumer.poll(max_messages=POLL_MESSAGES_MAX, wait_ms=0)
        ready.set()
        committed_s = time.monotonic()
        while not receiver.stopping:
            messages = await consumer.poll(max_messages=POLL_MESSAGES_MAX, wait_ms=WAIT_MS)
            received_ns = time.monotonic_ns()
            for message in messages:
                receiver.received(message.body, received_ns)
            if time.monotonic() - committed_s >= COMMIT_INTERVAL_S:
                await consumer.commit()
                committed_s = time.monotonic()


async def _xread_loop(spec: Spec, receiver: Receiver, ready: asyncio.Event) -> None:
    client = redis.asyncio.Redis(host="127.0.0.1", port=spec.redis_port)
    try:
        last_ids: dict[str, bytes | str] = dict.fromkeys(STREAMS, "0-0")
        await client.xread(last_ids, count=POLL_MESSAGES_MAX)  # connects
        ready.set()
        while not receiver.stopping:
            answer = await client.xread(last_ids, count=POLL_MESSAGES_MAX, block=WAIT_MS)
            received_ns = time.monotonic_ns()
            for stream, entries in answer or []:
                for _, fields in entries:
                    receiver.received(fields[b"b"], received_ns)
                last_ids[stream.decode()] = entries[-1][0]
    finally:
        await client.aclose()
