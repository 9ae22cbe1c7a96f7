"""The two client processes of bench/http_latency.py: a fixed-rate producer and a consumer.

Each runs in its own process (multiprocessing, spawn) on uvloop, so neither slows the other
and each one's CPU time is its own.  Both sides read the same clock: `time.monotonic_ns()`
is CLOCK_MONOTONIC, one clock for every process of the machine.

Producer: message `seq` is due at start + seq / rate; when due (or as soon after as the loop
gets to it) its body is stamped with `seq` and the send time, and it is sent on its own task
(at most `IN_FLIGHT_MAX` unanswered at once):

    body = b"%012d %020d %020d " % (seq, send_ns, send_wall_ns) + filler   1024 bytes

Consumer: long-polls until every message arrived (or `slack_s` after the producer finished:
the rest count as missing); each message's latency is the time its answer was read minus the
send time in its body.  The store's timestamp of the message (mqstore's store_timestamp_ms,
the millisecond of a Redis entry id) splits it, to the millisecond, in two legs on the wall
clock: send → stored (the write path) and stored → read (the read path).  For mqstore the
consumer also follows the indexer's notice stream (`GET /v1/notices`, as a notifier does) and
splits each latency, on the monotonic clock, at the "advanced" line that first covered the
message: send → noticed (writer, positions, indexer dispatch, notice batching) and noticed →
read (the notifier: stream, wake-up, get, answer; and the consumer's parse).  Kinds:

    pull    mqstore notifier, one long-polled `GET .../queues/{q}/messages` loop per queue
            (max 32 messages, wait 1 s), as RocketMQ's push consumer pulls each queue
    group   mqstore notifier through `mqstore.client.AsyncConsumer.poll` (max 256, wait 1 s),
            committing every 5 s (RocketMQ's persistConsumerOffsetInterval) between polls
    xread   Redis: one `XREAD BLOCK 1000 COUNT 256` over the eight streams, from the last ids
"""

from __future__ import annotations

import asyncio
import base64
import bisect
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
HEADER_BYTES = 55


@dataclasses.dataclass(frozen=True)
class Spec:
    """What both processes need to know about one measured point (picklable)."""

    consumer: str  # pull, group, xread
    rate_per_s: int
    count: int
    warmup_count: int
    slack_s: float
    """How long after the producer's last answer the consumer still waits for messages."""
    writer_url: str = ""
    indexer_url: str = ""
    notifier_url: str = ""
    redis_port: int = 0


def stamped(seq: int, send_ns: int) -> bytes:
    header = b"%012d %020d %020d " % (seq, send_ns, time.time_ns())
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


class NoticeProbe:
    """Follows the indexer's notice stream; when did a queue's "advanced" line first cover
    an offset?"""

    def __init__(self) -> None:
        self.advanced: dict[int, tuple[list[int], list[int]]] = {}
        """queue id: (next offsets, monotonic ns the line arrived), in stream order."""

    async def follow(self, indexer_url: str) -> None:
        async with aiohttp.ClientSession() as session, \
                session.get(f"{indexer_url}/v1/notices") as answer:
            while line := await answer.content.readline():
                arrived_ns = time.monotonic_ns()
                notice = json.loads(line)
                if notice["type"] != "advanced":
                    continue
                for topic, queue_id, next_offset in notice["queues"]:
                    if topic == TOPIC:
                        offsets, times = self.advanced.setdefault(queue_id, ([], []))
                        offsets.append(next_offset)
                        times.append(arrived_ns)

    def split_ms(self, places: list[tuple[int, int, int, int]]) -> list[tuple[float, float]]:
        """(send → noticed, noticed → received) in ms of each message the stream covered."""
        split = []
        for queue_id, queue_offset, send_ns, received_ns in places:
            offsets, times = self.advanced.get(queue_id, ([], []))
            index = bisect.bisect_right(offsets, queue_offset)
            if index < len(offsets):
                split.append(((times[index] - send_ns) / 1e6,
                              (received_ns - times[index]) / 1e6))
        return split


class Receiver:
    """Latency of every message as it arrives; duplicates counted, not measured twice."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.latency_ns: dict[int, int] = {}
        self.duplicates = 0
        self.legs_ms: dict[int, tuple[float, float]] = {}
        self.places: dict[int, tuple[int, int, int, int]] = {}
        """seq: (queue id, queue offset, send ns, received ns), for the notice split."""
        self.all_in = asyncio.Event()
        self.stopping = False

    def received(self, body: bytes, received_ns: int, *, stored_ms: int,
                 received_wall_ns: int, queue_id: int = -1, queue_offset: int = -1) -> None:
        seq, send_ns, send_wall_ns = int(body[:12]), int(body[13:33]), int(body[34:54])
        if seq in self.latency_ns:
            self.duplicates += 1
            return
        self.latency_ns[seq] = received_ns - send_ns
        self.legs_ms[seq] = (stored_ms - send_wall_ns / 1e6, received_wall_ns / 1e6 - stored_ms)
        self.places[seq] = (queue_id, queue_offset, send_ns, received_ns)
        if len(self.latency_ns) == self.spec.count:
            self.all_in.set()

    def result(self, probe: NoticeProbe | None) -> dict[str, Any]:
        seqs = [seq for seq in self.latency_ns if seq >= self.spec.warmup_count]
        measured = [self.latency_ns[seq] / 1e6 for seq in seqs]
        legs = [self.legs_ms[seq] for seq in seqs]
        split = [] if probe is None else probe.split_ms([self.places[seq] for seq in seqs])
        return {"missing": self.spec.count - len(self.latency_ns),
                "to_notice_ms": harness.percentiles([a for a, _ in split]) if split else [],
                "after_notice_ms": harness.percentiles([b for _, b in split]) if split else [],
                "duplicates": self.duplicates,
                "measured": len(measured),
                "latency_ms": harness.percentiles(measured, (50, 99, 100)) if measured else [],
                "write_leg_ms": harness.percentiles([w for w, _ in legs]) if legs else [],
                "read_leg_ms": harness.percentiles([r for _, r in legs]) if legs else []}


def consume_main(spec: Spec, connection: Connection) -> None:
    harness.install_uvloop()
    cpu_s = time.process_time()
    result = asyncio.run(_consume(spec, connection))
    connection.send({**result, "cpu_s": time.process_time() - cpu_s})


async def _consume(spec: Spec, connection: Connection) -> dict[str, Any]:
    receiver = Receiver(spec)
    loops = {"pull": _pull_loops, "group": _group_loop, "xread": _xread_loop}[spec.consumer]
    ready = asyncio.Event()
    probe = NoticeProbe() if spec.indexer_url else None
    probing = None if probe is None else asyncio.create_task(probe.follow(spec.indexer_url))
    task = asyncio.create_task(loops(spec, receiver, ready))
    await ready.wait()
    connection.send("ready")
    all_in = asyncio.create_task(receiver.all_in.wait())
    produced = asyncio.create_task(asyncio.to_thread(connection.recv))  # "producer done"
    await asyncio.wait({all_in, task, produced}, return_when=asyncio.FIRST_COMPLETED)
    if produced.done():  # stragglers get `slack_s`; what is still out then counts as missing
        await asyncio.wait({all_in, task}, timeout=spec.slack_s,
                           return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()  # the loops end only by failing: raise that here
    receiver.stopping = True  # each loop ends after its poll in progress (at most WAIT_MS)
    all_in.cancel()
    done, _ = await asyncio.wait({task}, timeout=WAIT_MS / 1000 + 5)
    if not done:
        task.cancel()
    await produced
    if probing is not None:
        probing.cancel()
        await asyncio.gather(probing, return_exceptions=True)
    return receiver.result(probe)


async def _pull_loops(spec: Spec, receiver: Receiver, ready: asyncio.Event) -> None:
    async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=QUEUES)) as session:

        async def pull(queue_id: int, offset: int, wait_ms: int) -> int:
            url = f"{spec.notifier_url}/v1/topics/{TOPIC}/queues/{queue_id}/messages"
            params = {"offset": offset, "max_messages": PULL_MESSAGES_MAX, "wait_ms": wait_ms}
            async with session.get(url, params=params) as answer:
                data = await answer.read()
            received_ns, received_wall_ns = time.monotonic_ns(), time.time_ns()
            assert answer.status == 200, data
            document = json.loads(data)
            for message in document["messages"]:
                receiver.received(base64.b64decode(message["body_base64"]), received_ns,
                                  stored_ms=message["store_timestamp_ms"],
                                  received_wall_ns=received_wall_ns, queue_id=queue_id,
                                  queue_offset=message["queue_offset"])
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
            received_ns, received_wall_ns = time.monotonic_ns(), time.time_ns()
            for message in messages:
                receiver.received(message.body, received_ns,
                                  stored_ms=message.store_timestamp_ms,
                                  received_wall_ns=received_wall_ns,
                                  queue_id=message.queue_id, queue_offset=message.queue_offset)
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
            received_ns, received_wall_ns = time.monotonic_ns(), time.time_ns()
            for stream, entries in answer or []:
                for entry_id, fields in entries:
                    receiver.received(fields[b"b"], received_ns,
                                      stored_ms=int(entry_id.split(b"-")[0]),
                                      received_wall_ns=received_wall_ns)
                last_ids[stream.decode()] = entries[-1][0]
    finally:
        await client.aclose()
