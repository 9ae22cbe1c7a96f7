"""Produce→consume latency through long polling, mqstore's three services beside Redis Streams.

    .venv/bin/python bench/http_latency.py [--rates 100 1000 5000] [--seconds 10] [--runs 2]
                                           [--consumers pull group xread] [--flush async]

Defaults take about 5 minutes (3 rates × 3 consumers × 2 runs × ~15 s).  Per point, fresh
servers: mqstore's indexer, writer and notifier as separate processes (harness.py; 8 queues
of one topic, the writer's round robin), or redis-server (redis_peer.py: `appendfsync
everysec` beside async flush, `always` beside sync).  Then two client processes on uvloop
(latency_clients.py): a consumer that holds long polls, and a producer sending single 1 KiB
messages at a fixed rate (mqstore: one JSON POST each; Redis: one XADD each), stamped with
the send time.  Latency = when the consumer read the answer holding the message − its send
time, over every message after the first second (the warm-up); p50, p99 and max; and the
same split at the store's timestamp into write and read legs (p50/p99, whole ms: the store's
clock has millisecond resolution); for mqstore also split at the indexer's notice (send →
noticed, noticed → read; p50/p99, see latency_clients.py).

Printed beside it, so that a slow client shows instead of passing for a slow server: how late
the producer sent (p99 of send time − due time), and the CPU each process used, as a share
of one core over the point's duration (producer, consumer, and each server process).
JSON goes to bench/results/http_latency-<time>.json.  Target (issue 4): p99 ≤ 10 ms at
1,000 msg/s.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
from collections.abc import Iterator
from typing import Any

import harness
import latency_clients
import redis_peer
from latency_clients import Spec

SLACK_S = 10.0
"""How long after the producer's last answer the consumer still waits for stragglers."""
MQSTORE_CONSUMERS = ("pull", "group")


@contextlib.contextmanager
def _servers(consumer: str, flush_mode: str) -> Iterator[tuple[dict[str, Any], Any]]:
    """Fresh servers for one point: (Spec fields naming them, an object with cpu_seconds())."""
    if consumer == "xread":
        with redis_peer.running_redis(
                appendfsync=redis_peer.APPENDFSYNC_OF_FLUSH[flush_mode]) as server:
            yield {"redis_port": server.port}, _RedisCpu(server)
        return
    services = harness.MqstoreServices(store={"flush_mode": flush_mode,
                                              "segment_size_bytes": 256 << 20})
    with harness.running(services):
        yield ({"writer_url": services.url("writer"), "indexer_url": services.url("indexer"),
                "notifier_url": services.url("notifier")}, services)


class _RedisCpu:
    def __init__(self, server: redis_peer.RedisServer) -> None:
        self._server = server

    def cpu_seconds(self) -> dict[str, float]:
        return {"redis-server": self._server.cpu_seconds()}


def measure_point(consumer: str, flush_mode: str, rate: int,
                  arguments: argparse.Namespace) -> dict[str, Any]:
    count = int(rate * (arguments.seconds + arguments.warmup_seconds))
    context = multiprocessing.get_context("spawn")
    with _servers(consumer, flush_mode) as (where, server):
        spec = Spec(consumer=consumer, rate_per_s=rate, count=count,
                    warmup_count=int(rate * arguments.warmup_seconds),
                    slack_s=SLACK_S, **where)
        consumer_end, consumer_here = context.Pipe()
        producer_end, producer_here = context.Pipe()
        consuming = context.Process(target=latency_clients.consume_main,
                                    args=(spec, consumer_end))
        consuming.start()
        assert consumer_here.poll(60) and consumer_here.recv() == "ready", "consumer not ready"
        server_cpu = server.cpu_seconds()
        producing = context.Process(target=latency_clients.produce_main,
                                    args=(spec, producer_end))
        producing.start()
        produced = producer_here.recv()
        consumer_here.send("producer done")
        consumed = consumer_here.recv()
        server_cpu = {name: seconds - server_cpu[name]
                      for name, seconds in server.cpu_seconds().items()}
        producing.join(30)
        consuming.join(30)
    elapsed_s = produced["elapsed_s"]
    return {"target": "redis-streams" if consumer == "xread" else "mqstore",
            "consumer": consumer, "flush": flush_mode, "rate_per_s": rate, "sent": count,
            **consumed, "producer_lateness_ms": produced["lateness_ms"],
            "cpu_share": {"producer": produced["cpu_s"] / elapsed_s,
                          "consumer": consumed["cpu_s"] / elapsed_s,
                          **{name: seconds / elapsed_s for name, seconds in server_cpu.items()}}}


def _row(points: list[dict[str, Any]]) -> dict[str, Any]:
    """One (target, consumer, flush, rate) over runs: medians of each figure."""
    first = points[0]

    def median(pick: Any) -> float:
        return statistics.median(pick(point) for point in points)

    row = {key: first[key] for key in ("target", "consumer", "flush", "rate_per_s")}
    row.update({
        "p50_ms": median(lambda p: p["latency_ms"][0]),
        "p99_ms": median(lambda p: p["latency_ms"][1]),
        "max_ms": median(lambda p: p["latency_ms"][2]),
        "write_leg_ms": [median(lambda p, i=i: p["write_leg_ms"][i]) for i in (0, 1)],
        "read_leg_ms": [median(lambda p, i=i: p["read_leg_ms"][i]) for i in (0, 1)],
        **{leg: [median(lambda p, i=i, leg=leg: p[leg][i]) for i in (0, 1)]
           if first[leg] else [] for leg in ("to_notice_ms", "after_notice_ms")},
        "p99_ms_runs": [p["latency_ms"][1] for p in points],
        "missing": max(p["missing"] for p in points),
        "duplicates": max(p["duplicates"] for p in points),
        "producer_late_p99_ms": median(lambda p: p["producer_lateness_ms"][1]),
        "cpu_share": {name: median(lambda p, n=name: p["cpu_share"][n])
                      for name in first["cpu_share"]},
        "points": points})
    cpu = " ".join(f"{name} {share:.2f}" for name, share in row["cpu_share"].items())
    print(f"{row['target']:<14}{row['consumer']:<7}{row['flush']:<7}{row['rate_per_s']:>6}"
          f"{row['p50_ms']:>8.2f}{row['p99_ms']:>8.2f}{row['max_ms']:>9.2f}"
          f"{'/'.join(f'{v:.1f}' for v in row['p99_ms_runs']):>16}{row['missing']:>6}"
          f"{row['duplicates']:>5}{row['producer_late_p99_ms']:>9.2f}"
          f"{'/'.join(f'{v:.0f}' for v in row['write_leg_ms']):>10}"
          f"{'/'.join(f'{v:.0f}' for v in row['read_leg_ms']):>10}"
          f"{'/'.join(f'{v:.1f}' for v in row['to_notice_ms']) or '-':>12}"
          f"{'/'.join(f'{v:.1f}' for v in row['after_notice_ms']) or '-':>12}   {cpu}",
          flush=True)
    return row


def main() -> None:
    arguments = _parser().parse_args()
    conditions = harness.Conditions.now()
    print(conditions.describe(), flush=True)
    print(f"{'target':<14}{'cons.':<7}{'flush':<7}{'msg/s':>6}{'p50 ms':>8}{'p99 ms':>8}"
          f"{'max ms':>9}{'p99 per run':>16}{'miss':>6}{'dup':>5}{'late p99':>9}"
          f"{'write ms':>10}{'read ms':>10}{'→notice ms':>12}{'notice→ ms':>12}   "
          f"CPU, share of one core")
    keys = [(consumer, flush_mode, rate) for flush_mode in arguments.flush
            for rate in arguments.rates for consumer in arguments.consumers]
    measured: dict[tuple[str, str, int], list[dict[str, Any]]] = {key: [] for key in keys}
    for _ in range(arguments.runs):
        for key in keys:  # interleaved: the VM's noise hits every point alike
            measured[key].append(measure_point(*key, arguments))
    rows = [_row(measured[key]) for key in keys]
    conditions.finish()
    print(conditions.describe())
    print(f"results: {harness.write_results('http_latency', conditions, vars(arguments), rows)}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, per point")
    parser.add_argument("--warmup-seconds", type=float, default=1.0,
                        help="messages sent in the first this-many seconds are not measured")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--consumers", nargs="+", choices=[*MQSTORE_CONSUMERS, "xread"],
                        default=[*MQSTORE_CONSUMERS, "xread"])
    parser.add_argument("--flush", nargs="+", choices=["async", "sync"], default=["async"])
    return parser


if __name__ == "__main__":
    main()
