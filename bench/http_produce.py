"""Produce throughput over HTTP: the commitlog-writer service beside Redis Streams.

    .venv/bin/python bench/http_produce.py [--seconds 5] [--runs 3] [--cases NAME ...]
                                           [--redis-cases NAME ...] [--flush async sync]
                                           [--event-loops uvloop asyncio] [--with-indexer]

Defaults take about 7 minutes (18 cases × 3 runs × ~8 s).  The writer runs as a separate
process (`mqstore writer --config FILE`, access log off; it never dispatches: in a pod the
indexer builds the queues, and `--with-indexer` runs that process beside it); the load comes
from asyncio clients on uvloop in this process over keep-alive connections to 127.0.0.1.
All share the machine's two cores, as they would on one node.

mqstore cases (1 KiB bodies, 8 queues of one topic, round robin):
  json-1         POST /v1/topics/{t}/messages, one message per request (body pre-encoded)
  bin-256        POST /v1/batch, 256 messages per request, binary results (body pre-encoded:
                 the writer still parses every message; the client only sends bytes)
  bin-256-json   the same with JSON results (the default when Accept is not set)
  client-256     AsyncProducer.send_batch of 256 messages: the Python client encodes each
                 batch, so this is what an application written with mqstore.client gets
Redis Streams cases (redis_peer.py: 1 KiB field values, 8 streams in turn, auto ids):
  xadd-1         redis-py (hiredis parser) `XADD`, one command per round trip
  raw-p64        pipelines of 64 pre-encoded XADDs over raw sockets (as bin-256: the client
  raw-p256       only sends bytes and counts replies), and of 256
  py-p256        redis-py pipeline(transaction=False) of 256 XADDs (as client-256)
  c-p64          `redis-benchmark -c 8 -P 64` (Redis's C client): the server's ceiling
each under mqstore's async flush beside `appendfsync everysec` and under sync flush (group
commit) beside `appendfsync always`.  Printed: messages/s and MB/s of bodies, median of
`--runs` runs of `--seconds` each (min–max beside it), each on a fresh server after
`--warmup-seconds` of the same load; and the CPU time per message of the server process(es)
(user + system, from /proc) and of the client (this process and any client subprocess).  On a
shared machine msg/s moves with the neighbours' load; CPU µs per message hardly does, and
1e6 / (server µs/msg) is the rate one dedicated core would sustain.  JSON goes to
bench/results/http_produce-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import resource
import shutil
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiohttp
import harness
import redis.asyncio
import redis_peer
from harness import BODY

from mqstore.client import AsyncProducer, OutgoingMessage
from mqstore.services.common.http.batch_wire import BATCH_MEDIA_TYPE, RESULT_MEDIA_TYPE, BatchCodec

BATCH = 256
TOPIC = "Bench"
STREAMS = [f"Bench:{queue_id}".encode() for queue_id in range(8)]
"""Redis keeps one stream per key: eight, filled in turn, as the writer's eight queues."""


class Target(Protocol):
    name: str
    cases: tuple[str, ...]

    def start(self, *, flush_mode: str) -> None: ...

    def stop(self) -> None: ...

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the target's processes have used so far."""
        ...

    def connections(self, case: str, flush_mode: str) -> int: ...

    async def run_case(self, case: str, *, seconds: float) -> int:
        """Run `case`'s load for `seconds`; return the messages stored."""
        ...


class MqstoreWriter:
    """`mqstore writer` (and with `with_indexer` the indexer) on a fresh directory per start."""

    def __init__(self, *, cases: tuple[str, ...], event_loop: str, with_indexer: bool) -> None:
        self.name = f"mqstore/{event_loop}"
        self.cases = cases
        self.event_loop = event_loop
        self._names = ("indexer", "writer") if with_indexer else ("writer",)
        self._services: harness.MqstoreServices | None = None
        self._flush_mode = ""
        self.url = ""

    def start(self, *, flush_mode: str) -> None:
        self._flush_mode = flush_mode
        self._services = harness.MqstoreServices(
            self._names, store={"flush_mode": flush_mode, "segment_size_bytes": 256 << 20},
            event_loop=self.event_loop)
        self._services.start()
        self.url = self._services.url("writer")

    def cpu_seconds(self) -> float:
        assert self._services is not None
        return sum(self._services.cpu_seconds().values())

    def stop(self) -> None:
        if self._services is not None:
            self._services.stop()
            self._services = None

    def connections(self, case: str, flush_mode: str) -> int:
        return CONNECTIONS[flush_mode][case]

    async def run_case(self, case: str, *, seconds: float) -> int:
        connections = self.connections(case, self._flush_mode)
        if case == "client-256":
            return await _producer_load(self.url, connections, seconds)
        path, body, headers, per_request = _request(case)
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=connections)) as session:

            async def post() -> None:
                async with session.post(self.url + path, data=body, headers=headers) as answer:
                    await answer.read()
                    if answer.status != 200:
                        raise RuntimeError(f"{case}: HTTP {answer.status}")

            requests = await _load(post, connections, seconds)
        return requests * per_request


class RedisStreams:
    """redis-server with an append-only file: `appendfsync everysec` beside async flush,
    `always` beside sync flush; a fresh server (and directory) per start."""

    def __init__(self, *, cases: tuple[str, ...]) -> None:
        self.name = "redis-streams"
        self.cases = cases
        self._server: redis_peer.RedisServer | None = None
        self._flush_mode = ""
        self._c_client_rate = 50_000.0
        """redis-benchmark runs a count, not a time: sized from the warm-up's rate."""

    def start(self, *, flush_mode: str) -> None:
        self._flush_mode = flush_mode
        self._server = redis_peer.RedisServer(
            appendfsync=redis_peer.APPENDFSYNC_OF_FLUSH[flush_mode])
        self._server.start()

    def cpu_seconds(self) -> float:
        assert self._server is not None
        return self._server.cpu_seconds()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def connections(self, case: str, flush_mode: str) -> int:
        return REDIS_CONNECTIONS[flush_mode][case]

    async def run_case(self, case: str, *, seconds: float) -> int:
        assert self._server is not None
        port, connections = self._server.port, self.connections(case, self._flush_mode)
        if case.startswith("raw-p"):
            depth = int(case.removeprefix("raw-p"))
            block = redis_peer.xadd_commands(STREAMS, BODY, depth)
            return await redis_peer.pipelined_load(port, block, depth, connections=connections,
                                                   seconds=seconds)
        if case == "c-p64":
            return self._c_client(port, connections, seconds)
        client = redis.asyncio.Redis(host="127.0.0.1", port=port, max_connections=connections)
        try:
            if case == "xadd-1":
                async def post() -> None:
                    await client.xadd(STREAMS[0], {b"b": BODY})

                return await _load(post, connections, seconds)

            async def pipeline() -> None:
                async with client.pipeline(transaction=False) as batch:
                    for i in range(BATCH):
                        batch.xadd(STREAMS[i % len(STREAMS)], {b"b": BODY})
                    await batch.execute()

            return await _load(pipeline, connections, seconds) * BATCH
        finally:
            await client.aclose()

    def _c_client(self, port: int, connections: int, seconds: float) -> int:
        binary = shutil.which("redis-benchmark")
        if binary is None:
            raise RuntimeError("redis-benchmark is not installed: run ./scripts/setup.sh")
        count = max(10_000, int(self._c_client_rate * seconds))
        started = time.monotonic()
        subprocess.run([binary, "-h", "127.0.0.1", "-p", str(port), "-c", str(connections),
                        "-P", "64", "-n", str(count), "-q", "XADD", STREAMS[0].decode(), "*",
                        "b", BODY.decode()], check=True, stdout=subprocess.DEVNULL)
        self._c_client_rate = count / (time.monotonic() - started)
        return count


def _request(case: str) -> tuple[str, bytes, dict[str, str], int]:
    if case == "json-1":
        return (f"/v1/topics/{TOPIC}/messages", json.dumps({"body": BODY.decode()}).encode(),
                {"Content-Type": "application/json"}, 1)
    batch = BatchCodec.encode([OutgoingMessage(TOPIC, BODY)] * BATCH)
    headers = {"Content-Type": BATCH_MEDIA_TYPE}
    if case == "bin-256":
        headers["Accept"] = RESULT_MEDIA_TYPE
    return "/v1/batch", batch, headers, BATCH


async def _load(post: Callable[[], Awaitable[None]], connections: int, seconds: float) -> int:
    """`connections` workers posting back to back until the deadline; requests completed."""
    deadline = time.monotonic() + seconds
    done = 0

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            await post()
            done += 1

    await asyncio.gather(*(worker() for _ in range(connections)))
    return done


async def _producer_load(url: str, connections: int, seconds: float) -> int:
    async with AsyncProducer(url, connections_max=connections) as producer:
        messages = [OutgoingMessage(TOPIC, BODY)] * BATCH

        async def post() -> None:
            results = await producer.send_batch(messages)
            assert results[-1].ok

        return await _load(post, connections, seconds) * BATCH


CASES = ("json-1", "bin-256", "bin-256-json", "client-256")
CONNECTIONS = {"async": {"json-1": 16, "bin-256": 4, "bin-256-json": 4, "client-256": 4},
               "sync": {"json-1": 64, "bin-256": 8, "bin-256-json": 8, "client-256": 8}}
"""Concurrent connections: enough that the writer never idles waiting for a client (sync
flush needs more, so that many requests share each group commit)."""
REDIS_CASES = ("xadd-1", "raw-p64", "raw-p256", "py-p256", "c-p64")
REDIS_CONNECTIONS = {
    "async": {"xadd-1": 16, "raw-p64": 4, "raw-p256": 4, "py-p256": 4, "c-p64": 8},
    "sync": {"xadd-1": 64, "raw-p64": 8, "raw-p256": 8, "py-p256": 8, "c-p64": 8}}
"""The writer's counts for the like cases; c-p64 is the reference's `-c 8 -P 64`."""


def main() -> None:
    arguments = _parser().parse_args()
    harness.install_uvloop()
    conditions = harness.Conditions.now()
    print(conditions.describe(), flush=True)
    print(f"{'target':<16}{'flush':<7}{'case':<14}{'conns':>6}{'msg/s':>10}{'MB/s':>8}"
          f"{'min–max msg/s':>18}{'server µs/msg':>15}{'client µs/msg':>15}")
    rows = []
    for flush_mode in arguments.flush:
        targets: list[Target] = [MqstoreWriter(cases=tuple(arguments.cases), event_loop=loop,
                                               with_indexer=arguments.with_indexer)
                                 for loop in arguments.event_loops]
        if arguments.redis_cases:
            targets.append(RedisStreams(cases=tuple(arguments.redis_cases)))
        pairs = [(target, case) for target in targets for case in target.cases]
        runs: dict[tuple[str, str], list[Run]] = {(t.name, c): [] for t, c in pairs}
        for _ in range(arguments.runs):
            for target, case in pairs:  # interleaved: the VM's noise hits every case alike
                runs[target.name, case].append(_measure(target, case, flush_mode, arguments))
        for target, case in pairs:
            rows.append(_row(target, case, flush_mode, runs[target.name, case]))
    conditions.finish()
    print(conditions.describe())
    path = harness.write_results("http_produce", conditions, vars(arguments), rows)
    print(f"results: {path}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup-seconds", type=float, default=2.0,
                        help="load before measuring: the first segments' neighbours are "
                             "still being prepared in the background")
    parser.add_argument("--cases", nargs="*", choices=CASES, default=list(CASES))
    parser.add_argument("--redis-cases", nargs="*", choices=REDIS_CASES,
                        default=list(REDIS_CASES), help="none: no Redis")
    parser.add_argument("--flush", nargs="+", choices=["async", "sync"],
                        default=["async", "sync"])
    parser.add_argument("--event-loops", nargs="+", choices=["uvloop", "asyncio"],
                        default=["uvloop"], help="the writer's event loop")
    parser.add_argument("--with-indexer", action="store_true",
                        help="run the indexer beside the writer (its CPU counts as server's)")
    return parser


@dataclasses.dataclass(frozen=True)
class Run:
    messages: int
    seconds: float
    server_cpu_s: float
    client_cpu_s: float


def _row(target: Target, case: str, flush_mode: str, measured: list[Run]) -> dict[str, Any]:
    rates = [run.messages / run.seconds for run in measured]
    median = statistics.median(rates)
    server_us = statistics.median(1e6 * r.server_cpu_s / r.messages for r in measured)
    client_us = statistics.median(1e6 * r.client_cpu_s / r.messages for r in measured)
    connections = target.connections(case, flush_mode)
    print(f"{target.name:<16}{flush_mode:<7}{case:<14}{connections:>6}"
          f"{median:>10,.0f}{median * len(BODY) / 1e6:>8.1f}"
          f"{f'{min(rates):,.0f}–{max(rates):,.0f}':>18}"
          f"{server_us:>15.1f}{client_us:>15.1f}", flush=True)
    return {"target": target.name, "flush": flush_mode, "case": case,
            "connections": connections, "msg_per_s": harness.summary(rates),
            "server_cpu_us_per_msg": server_us, "client_cpu_us_per_msg": client_us,
            "runs": [dataclasses.asdict(run) for run in measured]}


def _client_cpu_seconds() -> float:
    """This process and its exited children (redis-benchmark)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return harness.own_cpu_seconds() + children.ru_utime + children.ru_stime


def _measure(target: Target, case: str, flush_mode: str,
             arguments: argparse.Namespace) -> Run:
    """One measured window on a freshly started target, after the warm-up."""
    target.start(flush_mode=flush_mode)
    try:
        asyncio.run(target.run_case(case, seconds=arguments.warmup_seconds))
        server_cpu_s, client_cpu_s = target.cpu_seconds(), _client_cpu_seconds()
        started = time.monotonic()
        stored = asyncio.run(target.run_case(case, seconds=arguments.seconds))
        elapsed = time.monotonic() - started
        return Run(stored, elapsed, target.cpu_seconds() - server_cpu_s,
                   _client_cpu_seconds() - client_cpu_s)
    finally:
        target.stop()


if __name__ == "__main__":
    main()
