"""Produce throughput over HTTP: the commitlog-writer service as its container runs it.

    .venv/bin/python bench/http_produce.py [--seconds 5] [--runs 3] [--cases NAME ...]
                                           [--flush async sync] [--event-loops uvloop asyncio]

The writer runs as a separate process (`mqstore writer --config FILE`, access log off; it
never dispatches: in a pod the indexer builds the queues); the load
comes from asyncio clients in this process over keep-alive connections to 127.0.0.1.  Both
share the machine's cores, as they would on one node.

Cases (1 KiB bodies):
  json-1         POST /v1/topics/{t}/messages, one message per request (body pre-encoded)
  bin-256        POST /v1/batch, 256 messages per request, binary results (body pre-encoded:
                 the writer still parses every message; the client only sends bytes)
  bin-256-json   the same with JSON results (the default when Accept is not set)
  client-256     AsyncProducer.send_batch of 256 messages: the Python client encodes each
                 batch, so this is what an application written with mqstore.client gets
each under async flush and under sync flush (group commit).  Printed: messages/s and MB/s of
bodies, median of `--runs` runs of `--seconds` each (min–max beside it), each on a fresh
writer after `--warmup-seconds` of the same load; and the CPU time per message of the
writer process (user + system, from /proc) and of this client process.  On a shared
machine msg/s moves with the neighbours' load; CPU µs per message hardly does, and
1e6 / (writer µs/msg) is the rate one dedicated core would sustain.

A peer (e.g. Redis Streams) plugs in as another `Target`: something that starts, runs a
case's load for some seconds and returns the messages it stored, then stops.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import aiohttp

from mqstore.client import AsyncProducer, OutgoingMessage
from mqstore.services.common.wire import BATCH_MEDIA_TYPE, RESULT_MEDIA_TYPE, BatchCodec

BODY = bytes(range(32, 128)) * 10 + bytes(range(32, 96))  # 1024 printable bytes
assert len(BODY) == 1024
BATCH = 256
TOPIC = "Bench"


class Target(Protocol):
    name: str

    def start(self, *, flush_mode: str) -> None: ...

    def stop(self) -> None: ...

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the target's processes have used so far."""
        ...

    async def run_case(self, case: str, *, seconds: float) -> int:
        """Run `case`'s load for `seconds`; return the messages stored."""
        ...


class MqstoreWriter:
    """`mqstore writer` in a subprocess on a fresh directory per start."""

    def __init__(self, *, connections: dict[str, int], event_loop: str) -> None:
        self.name = f"mqstore/{event_loop}"
        self.connections = connections
        self.event_loop = event_loop
        self._process: subprocess.Popen[str] | None = None
        self._directory: Path | None = None
        self.url = ""

    def start(self, *, flush_mode: str) -> None:
        self._directory = Path(tempfile.mkdtemp(prefix="mqstore-http-bench-"))
        config = {"data_dir": str(self._directory / "data"),
                  "store": {"flush_mode": flush_mode, "segment_size_bytes": 256 << 20},
                  "writer": {"host": "127.0.0.1", "port": 0, "log_level": "warning",
                             "event_loop": self.event_loop}}
        path = self._directory / "mqstore.yaml"
        path.write_text(json.dumps(config))
        self._process = subprocess.Popen(
            [sys.executable, "-m", "mqstore.services.cli", "writer", "--config", str(path)],
            stderr=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{self._await_port()}"

    def _await_port(self) -> int:
        # log_level warning hides "listening"; the port is read from the process instead.
        assert self._process is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ports = _listening_ports(self._process.pid)
            if ports:
                return ports[0]
            assert self._process.poll() is None, self._process.stderr.read()  # type: ignore[union-attr]
            time.sleep(0.05)
        raise RuntimeError("the writer did not start listening within 30 s")

    def cpu_seconds(self) -> float:
        assert self._process is not None
        fields = Path(f"/proc/{self._process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=60)
            self._process = None
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)

    async def run_case(self, case: str, *, seconds: float) -> int:
        connections = self.connections[case]
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


def _listening_ports(pid: int) -> list[int]:
    """TCP ports `pid` listens on, from /proc (no psutil)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
            ports.append(int(fields[1].split(":")[1], 16))
    return ports


CASES = ("json-1", "bin-256", "bin-256-json", "client-256")
CONNECTIONS = {"async": {"json-1": 16, "bin-256": 4, "bin-256-json": 4, "client-256": 4},
               "sync": {"json-1": 64, "bin-256": 8, "bin-256-json": 8, "client-256": 8}}
"""Concurrent connections: enough that the writer never idles waiting for a client (sync
flush needs more, so that many requests share each group commit)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup-seconds", type=float, default=2.0,
                        help="load before measuring: the first segments' neighbours are "
                             "still being prepared in the background")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--flush", nargs="+", choices=["async", "sync"],
                        default=["async", "sync"])
    parser.add_argument("--event-loops", nargs="+", choices=["uvloop", "asyncio"],
                        default=["uvloop"])
    arguments = parser.parse_args()
    print(f"{'target':<16}{'flush':<7}{'case':<14}{'conns':>6}{'msg/s':>10}{'MB/s':>8}"
          f"{'min–max msg/s':>18}{'writer µs/msg':>15}{'client µs/msg':>15}")
    for flush_mode in arguments.flush:
        targets: list[Target] = [MqstoreWriter(connections=CONNECTIONS[flush_mode],
                                               event_loop=loop)
                                 for loop in arguments.event_loops]
        for case in arguments.cases:
            runs: dict[str, list[Run]] = {target.name: [] for target in targets}
            for _ in range(arguments.runs):
                for target in targets:  # interleaved: the VM's noise hits every target alike
                    runs[target.name].append(_measure(target, case, flush_mode, arguments))
            for name, measured in runs.items():
                rates = [run.messages / run.seconds for run in measured]
                median = statistics.median(rates)
                writer_us = statistics.median(1e6 * r.writer_cpu_s / r.messages for r in measured)
                client_us = statistics.median(1e6 * r.client_cpu_s / r.messages for r in measured)
                print(f"{name:<16}{flush_mode:<7}{case:<14}{CONNECTIONS[flush_mode][case]:>6}"
                      f"{median:>10,.0f}{median * len(BODY) / 1e6:>8.1f}"
                      f"{f'{min(rates):,.0f}–{max(rates):,.0f}':>18}"
                      f"{writer_us:>15.1f}{client_us:>15.1f}", flush=True)


@dataclasses.dataclass(frozen=True)
class Run:
    messages: int
    seconds: float
    writer_cpu_s: float
    client_cpu_s: float


def _measure(target: Target, case: str, flush_mode: str,
             arguments: argparse.Namespace) -> Run:
    """One measured window on a freshly started target, after the warm-up."""
    target.start(flush_mode=flush_mode)
    try:
        asyncio.run(target.run_case(case, seconds=arguments.warmup_seconds))
        writer_cpu_s, client_cpu_s = target.cpu_seconds(), time.process_time()
        stored = asyncio.run(target.run_case(case, seconds=arguments.seconds))
        return Run(stored, arguments.seconds, target.cpu_seconds() - writer_cpu_s,
                   time.process_time() - client_cpu_s)
    finally:
        target.stop()


if __name__ == "__main__":
    main()
