"""RocketMQ's Java client against Apache RocketMQ 5.5.0 and against another name server, in the
same run on the same machine: the benchmark of issue 16.

The client is the scenario program of tests/remoting_clients (rocketmq-client 5.5.0, its
`bench-*` subcommands, `Bench.java`); RocketMQ is the peer of
tests/remoting_clients/rocketmq_peer.py (name server and one broker, loopback, started here
once per flush mode).  Another system is given by its name server address and the pids of all
its server processes (`--namesrv 127.0.0.1:9876 --pids 11,12,13 --label mqstore`); it runs
with whatever flush it was started with, so then `--flush` names that one mode.

Cases, 1 KiB bodies, each on a fresh topic:

| case | what the client does |
|---|---|
| produce-16, produce-64 | single sync sends from 16 or 64 threads |
| batch-256 | sync batches of 256 messages from 4 threads |
| consume | lite pull, every queue of batch-256's topic from offset 0 to the end |
| latency-1000 | async sends at 1,000 msg/s, a push consumer in the same JVM: send to receive |

Before each case the driver waits until the servers are idle (less than 20 ms of CPU in a
second, at most 60 s: `settle`), so that what a system does once after it starts is not
charged to the case that follows.  Each row has msg/s, the p50/p99 of the send (or
send-to-receive) latency, and the servers' CPU time per message: user + system time of the
given pids, all added up, from /proc/<pid>/stat read when the client prints
`{"phase":"start"}` and `{"phase":"end"}` around its measured part; and the client JVM's CPU
time per message over the same span (on a 2-core machine a client near one core per second is
what bounds msg/s, whatever the server).  The table is printed in Markdown with the date and
the load average, and the rows go to bench/results/ as JSON.

    .venv/bin/python bench/remoting_vs_rocketmq.py                      # RocketMQ, both flushes
    .venv/bin/python bench/remoting_vs_rocketmq.py --flush async --namesrv 127.0.0.1:9876 \\
        --pids 4242,4243,4244 --label mqstore
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import harness

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.remoting_clients.java_clients import CLIENT_5, JavaClients
from tests.remoting_clients.rocketmq_peer import RocketMqPeer

CASES = ("produce-16", "produce-64", "batch-256", "consume", "latency-1000")
BODY_BYTES = 1024
BENCH_JVM_OPTIONS = (
    # The full JIT and a heap for 64 senders' buffers: the client should not be what is measured.
    "-Xms512m", "-Xmx512m", "-XX:+UseParallelGC",
    "-Drocketmq.client.rebalance.waitInterval=2000",
    "-Drocketmq.client.logLevel=WARN", "-Drocketmq.log.level=warn",
)
RUN_TIMEOUT_S = 900
SETTLE_IDLE_CPU_S = 0.02
"""Before each case the servers must use less than this CPU time in a second (2% of a core):
whatever a system does once after starting (mqstore prepares its next commit log segment,
~0.4 s of CPU per GiB; a JVM broker compiles) is not charged to the case that follows."""
SETTLE_WAIT_S_MAX = 60.0


@dataclasses.dataclass(frozen=True)
class Target:
    label: str
    namesrv: str
    pids: tuple[int, ...]

    def cpu_seconds(self) -> float:
        return float(sum(harness.process_cpu_seconds(pid) for pid in self.pids))


def settle(target: Target, *, wait_s_max: float = SETTLE_WAIT_S_MAX) -> float:
    """Wait until the target's servers are idle (`SETTLE_IDLE_CPU_S` in a second), at most
    `wait_s_max`; returns the seconds waited."""
    started = time.monotonic()
    before = target.cpu_seconds()
    while time.monotonic() - started < wait_s_max:
        time.sleep(1.0)
        after = target.cpu_seconds()
        if after - before < SETTLE_IDLE_CPU_S:
            break
        before = after
    return time.monotonic() - started


@dataclasses.dataclass(frozen=True)
class Sizes:
    single_count: int = 20_000
    batch_count: int = 256_000
    latency_seconds: int = 20
    warmup_count: int = 8_192
    """Single sends and as many in batches before the first case, not recorded: a fresh JVM
    broker interprets its code for the first thousands of requests, and its JIT compiles
    would be charged to the first case's CPU per message."""
    settle_wait_s: float = SETTLE_WAIT_S_MAX
    """How long to wait for the servers to go idle before each case, at most."""


def run_bench(clients: JavaClients, target: Target, scenario: str, topic: str,
              **options: object) -> dict[str, Any]:
    """One bench subcommand; its result line plus the servers' CPU time between its phases."""
    argv = clients.argv(scenario, namesrv=target.namesrv, topic=topic,
                        options={"body_bytes": BODY_BYTES, **options},
                        jvm_options=BENCH_JVM_OPTIONS)
    cpu: dict[str, float] = {}
    client_cpu: dict[str, float] = {}
    result: dict[str, Any] | None = None
    with tempfile.TemporaryFile("w+") as stderr:
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if not line.startswith("{"):
                    continue
                parsed = json.loads(line)
                if "phase" in parsed:
                    cpu[parsed["phase"]] = target.cpu_seconds()
                    client_cpu[parsed["phase"]] = harness.process_cpu_seconds(proc.pid)
                elif parsed.get("scenario") == scenario:
                    result = parsed
            proc.wait(timeout=RUN_TIMEOUT_S)
        stderr.seek(0)
        if proc.returncode != 0 or result is None or set(cpu) != {"start", "end"}:
            raise RuntimeError(f"{scenario} against {target.label} failed (exit "
                               f"{proc.returncode}):\n{stderr.read()[-6000:]}")
    result["serverCpuS"] = cpu["end"] - cpu["start"]
    result["clientCpuS"] = client_cpu["end"] - client_cpu["start"]
    return result


def run_case(clients: JavaClients, target: Target, case: str, sizes: Sizes,
             batch_topic: str) -> dict[str, Any]:
    topic = f"bench-{case}-{uuid.uuid4().hex[:8]}"
    if case.startswith("produce-"):
        threads = int(case.removeprefix("produce-"))
        return run_bench(clients, target, "bench-produce", topic, threads=threads,
                         count=sizes.single_count)
    if case == "batch-256":
        return run_bench(clients, target, "bench-batch", batch_topic, threads=4, batch=256,
                         count=sizes.batch_count)
    if case == "consume":
        # batch-256 wrote its count plus one untimed first send (it creates the topic).
        count = sizes.batch_count // 256 // 4 * 256 * 4 + 1
        return run_bench(clients, target, "bench-consume", batch_topic, count=count,
                         pull_batch=32)
    if case == "latency-1000":
        return run_bench(clients, target, "bench-latency", topic, rate=1000,
                         duration_s=sizes.latency_seconds)
    raise ValueError(f"unknown case {case!r}; known: {CASES}")


def measure(clients: JavaClients, target: Target, flush: str, cases: Sequence[str],
            sizes: Sizes) -> list[dict[str, Any]]:
    batch_topic = f"bench-batch-{uuid.uuid4().hex[:8]}"
    if "consume" in cases and "batch-256" not in cases:
        raise ValueError("consume reads what batch-256 wrote: run both")
    if sizes.warmup_count:
        warmup_topic = f"bench-warmup-{uuid.uuid4().hex[:8]}"
        run_bench(clients, target, "bench-produce", warmup_topic, threads=16,
                  count=sizes.warmup_count)
        run_bench(clients, target, "bench-batch", warmup_topic, threads=4, batch=256,
                  count=sizes.warmup_count)
    rows = []
    for case in cases:
        settled_s = settle(target, wait_s_max=sizes.settle_wait_s)
        result = run_case(clients, target, case, sizes, batch_topic)
        messages = result["messages"] if case != "latency-1000" else result["received"]
        rows.append({"target": target.label, "flush": flush, "case": case,
                     "msg_per_s": result["msgPerS"], "p50_us": result.get("p50Us"),
                     "p99_us": result.get("p99Us"), "messages": messages,
                     "server_cpu_us_per_msg": result["serverCpuS"] * 1e6 / max(1, messages),
                     "client_cpu_us_per_msg": result["clientCpuS"] * 1e6 / max(1, messages),
                     "ok": result["ok"], "failures": result.get("failures", 0),
                     "failure_samples": result.get("failureSamples", []),
                     # latency-1000 only: the latency split at the record's store timestamp
                     "send_to_store_ms": result.get("sendToStoreMs"),
                     "store_to_receive_ms": result.get("storeToReceiveMs"),
                     "settled_s": round(settled_s, 1)})
        print(f"  {target.label} {flush} {case}: {rows[-1]}", flush=True)
    return rows


def markdown(rows: Sequence[dict[str, Any]], conditions: harness.Conditions) -> str:
    def number(value: float | None, digits: int = 0) -> str:
        return "–" if value is None else f"{value:,.{digits}f}"

    lines = [f"RocketMQ's Java client ({CLIENT_5}), 1 KiB bodies; {conditions.describe()}", "",
             "| case | flush | target | msg/s | p50 µs | p99 µs | server CPU µs/msg "
             "| client CPU µs/msg | ok |",
             "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        lines.append(f"| {row['case']} | {row['flush']} | {row['target']} | "
                     f"{number(row['msg_per_s'])} | {number(row['p50_us'])} | "
                     f"{number(row['p99_us'])} | {number(row['server_cpu_us_per_msg'], 1)} | "
                     f"{number(row.get('client_cpu_us_per_msg'), 1)} | "
                     f"{'yes' if row['ok'] else 'NO'} |")
    return "\n".join(lines)


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flush", nargs="+", choices=("async", "sync"),
                        default=["async", "sync"])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--namesrv", help="another system's name server, measured after RocketMQ")
    parser.add_argument("--pids", default="", help="that system's server pids, comma-separated")
    parser.add_argument("--label", default="other", help="that system's name in the table")
    parser.add_argument("--rocketmq", action=argparse.BooleanOptionalAction, default=True,
                        help="measure RocketMQ 5.5.0 (--no-rocketmq: only --namesrv)")
    parser.add_argument("--single-count", type=int, default=Sizes.single_count)
    parser.add_argument("--batch-count", type=int, default=Sizes.batch_count)
    parser.add_argument("--latency-seconds", type=int, default=Sizes.latency_seconds)
    parser.add_argument("--warmup-count", type=int, default=Sizes.warmup_count)
    parser.add_argument("--settle-wait-s", type=float, default=Sizes.settle_wait_s,
                        help="wait at most this long for the servers to go idle before each "
                             "case (0: do not wait)")
    arguments = parser.parse_args(argv)
    if arguments.namesrv and (len(arguments.flush) != 1 or not arguments.pids):
        parser.error("--namesrv needs --pids and the one --flush that system runs with")
    if not arguments.rocketmq and not arguments.namesrv:
        parser.error("--no-rocketmq leaves nothing to measure without --namesrv")
    return arguments


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    sizes = Sizes(arguments.single_count, arguments.batch_count, arguments.latency_seconds,
                  arguments.warmup_count, arguments.settle_wait_s)
    clients = JavaClients.build(CLIENT_5)
    conditions = harness.Conditions.now()
    rows: list[dict[str, Any]] = []
    for flush in arguments.flush:
        if arguments.rocketmq:
            with RocketMqPeer.start(flush=flush) as peer:
                rocketmq = Target("rocketmq-5.5.0", peer.namesrv, tuple(peer.pids))
                rows += measure(clients, rocketmq, flush, arguments.cases, sizes)
        if arguments.namesrv:
            other = Target(arguments.label, arguments.namesrv,
                           tuple(int(pid) for pid in arguments.pids.split(",")))
            rows += measure(clients, other, flush, arguments.cases, sizes)
    conditions.finish()
    path = harness.write_results("remoting_vs_rocketmq", conditions, vars(arguments), rows)
    print(markdown(rows, conditions))
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
