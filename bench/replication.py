"""Replication: sync-master produce latency with the pool off and on, async-master follower lag.

    .venv/bin/python bench/replication.py [--runs 3] [--seconds 5] [--connections 1 16]

Each case starts two `mqstore writer` processes on fresh directories, a master and a follower
(`--role follower --master 127.0.0.1:PORT`), both on uvloop, flush async, 64 MiB segments,
and loads the master from asyncio clients (uvloop) in this process over keep-alive
connections to 127.0.0.1.  Master, follower and clients share the machine's two cores.

Cases:
  sync/pool-off, sync/pool-on   SYNC_MASTER: each of `--connections` clients sends one 1 KiB
                                JSON message per request and waits for the answer, which
                                comes only once the follower confirmed it.  Latency is the
                                client's, per request; pool-on keeps RocketMQ's commit service
                                defaults (16 KiB or 200 ms), which without commit on demand
                                would hold every small message up to 200 ms (RocketMQ issue #1372).
  sync/pool-on-no-demand        (with --with-cliff) pool-on with commit on demand patched out
                                in the writer processes (this script's bootstrap, nothing
                                in the engine): the sender sees bytes only when the commit
                                service's 200 ms pass commits them, as in RocketMQ 4.9.4.
                                The cliff the other two cases do not have.
  async-lag/pool-off, .../on    ASYNC_MASTER under binary batches of 256 × 1 KiB from 4
                                connections: the follower's lag in bytes, sampled every 20 ms
                                from the master's GET /v1/replication, and how long after the
                                load stops the follower has everything.

The two sync-master cases are paired: both pairs of processes run at once, and the clients
load one master then the other in turns of `--slice-seconds` until each had `--seconds`, so
the neighbours' load (this machine is shared) falls on both alike, slice by slice, while the
two never load each other.  Every run repeats all of it (the order of the pool-off and pool-on
cases alternating between runs); the figures are medians over `--runs` runs, with min-max.
Results go to bench/results/replication-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import uvloop

from mqstore.services.common.http.batch_wire import BATCH_MEDIA_TYPE, BatchCodec, WireMessage

MQSTORE = [sys.executable, "-P", "-m", "mqstore.services.cli"]
BODY = bytes(range(256)) * 4
TOPIC = "Bench"
STORE = {"segment_size_bytes": 64 << 20, "pool_buffer_count": 3,
         "replication_sync_timeout_ms": 3000}
RESULTS = Path(os.environ.get("MQSTORE_BENCH_RESULTS_DIR", Path(__file__).parent / "results"))
NO_DEMAND_BOOTSTRAP = """
import sys
from mqstore.storage.log import flush
from mqstore.storage.replication import replication
init = replication.Replication.__init__
def without_commit_on_demand(self, *args, **kwargs):
    init(self, *args, **kwargs)
    self._commit_on_read = None
replication.Replication.__init__ = without_commit_on_demand
flush.CommitService.wake_if_rolled = lambda self, end_position: None
from mqstore.services.cli.command import main
sys.exit(main(sys.argv[1:]))
"""
"""RocketMQ 4.9.4's pool: only the commit service's own pass (every commit_interval_ms, at
least commit_pages_min pages or commit_thorough_interval_ms since the last) makes bytes
readable; a put does not wake it (4.9.4) and the sender does not commit (patched out)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Writer:
    def __init__(self, root: Path, name: str, *, role: str, store: dict[str, Any],
                 master: str | None = None, bootstrap: str | None = None) -> None:
        self.port, self.replication_port = free_port(), free_port()
        config = root / f"{name}.yaml"
        config.write_text(json.dumps({
            "data_dir": str(root / name), "store": store,
            "writer": {"host": "127.0.0.1", "port": self.port},
            "replication": {"host": "127.0.0.1", "port": self.replication_port}}))
        mqstore = MQSTORE if bootstrap is None else [sys.executable, "-P", "-c", bootstrap]
        command = [*mqstore, "writer", "--config", str(config), "--role", role]
        if master is not None:
            command += ["--master", master]
        self.log = open(root / f"{name}.log", "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(command, stdout=self.log, stderr=self.log,
                                        stdin=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while not self._ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start; see {self.log.name}")
            time.sleep(0.05)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=1) as answer:
                return answer.status == 200
        except OSError:
            return False

    def status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/v1/replication", timeout=5) as answer:
            document: dict[str, Any] = json.loads(answer.read())
            return document

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)
        self.log.close()


class Pair:
    """A master and its follower, connected."""

    def __init__(self, root: Path, *, role: str, pool: bool,
                 bootstrap: str | None = None) -> None:
        store = {**STORE, "pool_enabled": pool}
        self.master = Writer(root, "master", role=role, store=store, bootstrap=bootstrap)
        self.follower = Writer(root, "follower", role="follower", store=store,
                               master=f"127.0.0.1:{self.master.replication_port}")
        deadline = time.monotonic() + 30
        while not self.master.status()["followers"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the follower did not connect")
            time.sleep(0.05)

    def stop(self) -> None:
        self.follower.stop()
        self.master.stop()


# -- sync master: latency ----------------------------------------------------------------------
async def _sender(session: aiohttp.ClientSession, url: str, stop_at: float,
                  latencies: list[float], refused: list[int]) -> None:
    body = json.dumps({"body": BODY.decode("latin-1")}).encode()
    headers = {"Content-Type": "application/json"}
    clock = time.perf_counter
    while clock() < stop_at:
        started = clock()
        async with session.post(url, data=body, headers=headers) as response:
            await response.read()
            if response.status != 200:
                refused[0] += 1
                continue
        latencies.append(clock() - started)


async def paired_sync_load(urls: dict[str, str], *, connections: int, seconds: float,
                           slice_seconds: float, warmup_seconds: float
                           ) -> dict[str, dict[str, Any]]:
    """Load each master in turn, `slice_seconds` at a time, until each had `seconds`: both
    cases see the same neighbours' load, slice by slice (paired), never each other's."""
    latencies: dict[str, list[float]] = {name: [] for name in urls}
    refused = {name: [0] for name in urls}
    loaded_s = dict.fromkeys(urls, 0.0)
    sessions = {name: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections))
                for name in urls}
    try:
        for name, url in urls.items():  # warm up each (discarded)
            stop_at = time.perf_counter() + warmup_seconds
            await asyncio.gather(*(_sender(sessions[name], f"{url}/v1/topics/{TOPIC}/messages",
                                           stop_at, [], [0]) for _ in range(connections)))
        while min(loaded_s.values()) < seconds:
            for name, url in urls.items():
                started = time.perf_counter()
                await asyncio.gather(*(_sender(sessions[name],
                                               f"{url}/v1/topics/{TOPIC}/messages",
                                               started + slice_seconds, latencies[name],
                                               refused[name]) for _ in range(connections)))
                loaded_s[name] += time.perf_counter() - started
    finally:
        for session in sessions.values():
            await session.close()
    results = {}
    for name, values in latencies.items():
        values.sort()
        results[name] = {"messages_per_s": len(values) / loaded_s[name],
                         "requests_not_200": refused[name][0],
                         "p50_ms": _quantile(values, 0.50) * 1000,
                         "p99_ms": _quantile(values, 0.99) * 1000,
                         "max_ms": values[-1] * 1000 if values else 0.0,
                         "requests": len(values)}
    return results


def _quantile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- async master: follower lag ------------------------------------------------------------------
async def _batch_sender(session: aiohttp.ClientSession, url: str, stop_at: float,
                        sent: list[int]) -> None:
    batch = BatchCodec.encode([WireMessage(TOPIC, BODY) for _ in range(256)])
    while time.perf_counter() < stop_at:
        async with session.post(url, data=batch,
                                headers={"Content-Type": BATCH_MEDIA_TYPE}) as response:
            await response.read()
            assert response.status == 200, response.status
        sent[0] += 256


async def lag_load(pair: Pair, *, seconds: float) -> dict[str, Any]:
    samples: list[int] = []
    sent = [0]
    stop_at = time.perf_counter() + seconds

    async def sample() -> None:
        loop = asyncio.get_running_loop()
        while time.perf_counter() < stop_at:
            status = await loop.run_in_executor(None, pair.master.status)
            samples.extend(follower["lag_bytes"] for follower in status["followers"])
            await asyncio.sleep(0.02)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=4)) as session:
        await asyncio.gather(sample(), *(_batch_sender(session, f"{pair.master.url}/v1/batch",
                                                       stop_at, sent) for _ in range(4)))
    stopped = time.perf_counter()
    end = pair.master.status()["written_position"]
    while pair.follower.status()["written_position"] < end:
        await asyncio.sleep(0.005)
    samples.sort()
    return {"messages_per_s": sent[0] / seconds, "lag_p50_bytes": _quantile(samples, 0.5),
            "lag_p99_bytes": _quantile(samples, 0.99), "lag_max_bytes": samples[-1],
            "catch_up_after_load_ms": (time.perf_counter() - stopped) * 1000,
            "samples": len(samples)}


# -- driver -------------------------------------------------------------------------------------
def run_sync(pools: tuple[bool, ...], arguments: argparse.Namespace) -> dict[str, Any]:
    """The sync-master pairs up at once, loaded in alternating slices (paired)."""
    cases = [(f"sync/pool-{'on' if pool else 'off'}", pool, None) for pool in pools]
    if arguments.with_cliff:
        cases.append(("sync/pool-on-no-demand", True, NO_DEMAND_BOOTSTRAP))
    with tempfile.TemporaryDirectory(prefix="mqstore-replication-", dir=arguments.dir) as root:
        pairs = {}
        try:
            for name, pool, bootstrap in cases:
                directory = Path(root) / name.replace("/", "-")
                directory.mkdir()
                pairs[name] = Pair(directory, role="sync_master", pool=pool,
                                   bootstrap=bootstrap)
            urls = {name: pair.master.url for name, pair in pairs.items()}
            by_connections = {str(connections): uvloop.run(paired_sync_load(
                urls, connections=connections, seconds=arguments.seconds,
                slice_seconds=arguments.slice_seconds,
                warmup_seconds=arguments.warmup_seconds))
                for connections in arguments.connections}
        finally:
            for pair in pairs.values():
                pair.stop()
    return {name: {connections: results[name]
                   for connections, results in by_connections.items()} for name in pairs}


def run_lag(pool: bool, arguments: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mqstore-replication-", dir=arguments.dir) as root:
        pair = Pair(Path(root), role="async_master", pool=pool)
        try:
            return uvloop.run(lag_load(pair, seconds=arguments.lag_seconds))
        finally:
            pair.stop()


def summarize(values: list[float]) -> str:
    return (f"{statistics.median(values):,.2f} ({min(values):,.2f}-{max(values):,.2f})"
            if len(values) > 1 else f"{values[0]:,.2f}")


def report(runs: list[dict[str, Any]], arguments: argparse.Namespace) -> None:
    print(f"\nmedians of {len(runs)} runs (min-max); load average now "
          f"{os.getloadavg()[0]:.1f}")
    for connections in map(str, arguments.connections):
        print(f"\nSYNC_MASTER, {connections} connection(s), 1 KiB single messages:")
        print(f"{'pool':<13}{'msg/s':>26}{'p50 ms':>24}{'p99 ms':>24}")
        p99 = {}
        for pool in ("off", "on", "on-no-demand") if arguments.with_cliff else ("off", "on"):
            rows = [run[f"sync/pool-{pool}"][connections] for run in runs]
            p99[pool] = [row["p99_ms"] for row in rows]
            print(f"{pool:<13}{summarize([r['messages_per_s'] for r in rows]):>26}"
                  f"{summarize([r['p50_ms'] for r in rows]):>24}"
                  f"{summarize(p99[pool]):>24}")
        ratios = [on / off for on, off in zip(p99["on"], p99["off"], strict=True)]
        print(f"p99 pool-on / pool-off, per run: {', '.join(f'{r:.2f}' for r in ratios)}; "
              f"median {statistics.median(ratios):.2f} (target <= 1.25)")
        if arguments.with_cliff:
            cliff = [late / off for late, off in zip(p99["on-no-demand"], p99["off"],
                                                     strict=True)]
            print(f"p99 pool-on without commit on demand / pool-off, per run: "
                  f"{', '.join(f'{r:.1f}' for r in cliff)}; median "
                  f"{statistics.median(cliff):.1f}")
    print("\nASYNC_MASTER, binary batches of 256 x 1 KiB from 4 connections: follower lag")
    for pool in ("off", "on"):
        rows = [run[f"lag/pool-{pool}"] for run in runs]
        print(f"pool {pool}: msg/s {summarize([r['messages_per_s'] for r in rows])}, lag p50 "
              f"{summarize([r['lag_p50_bytes'] / 1024 for r in rows])} KiB, p99 "
              f"{summarize([r['lag_p99_bytes'] / 1024 for r in rows])} KiB, max "
              f"{summarize([r['lag_max_bytes'] / 1024 for r in rows])} KiB, caught up "
              f"{summarize([r['catch_up_after_load_ms'] for r in rows])} ms after the load")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="sync-master load per case and connection count")
    parser.add_argument("--slice-seconds", type=float, default=0.5,
                        help="the cases take turns this long")
    parser.add_argument("--lag-seconds", type=float, default=5.0)
    parser.add_argument("--warmup-seconds", type=float, default=1.0)
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--with-cliff", action="store_true",
                        help="add the pool-on case without commit on demand (RocketMQ 4.9.4)")
    parser.add_argument("--dir", default=None, help="where the stores go (default: $TMPDIR)")
    arguments = parser.parse_args()
    if arguments.runs < 2:
        parser.error("--runs must be at least 2: the machine is shared, one run says little")
    runs = []
    for index in range(arguments.runs):
        pools = (False, True) if index % 2 == 0 else (True, False)
        run: dict[str, Any] = {"started": time.time(), "load_average": os.getloadavg()[0]}
        run.update(run_sync(pools, arguments))
        for pool in pools:
            run[f"lag/pool-{'on' if pool else 'off'}"] = run_lag(pool, arguments)
        for name, result in run.items():
            print(f"run {index + 1} {name}: {json.dumps(result)}", flush=True)
        runs.append(run)
    report(runs, arguments)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"replication-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"arguments": vars(arguments), "runs": runs,
                                "load_average_end": os.getloadavg()[0]}, indent=1))
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
