"""The cost of TLS: server CPU per message for batched produce and consume, with and without.

    .venv/bin/python bench/tls_cost.py [--seconds 5] [--runs 3] [--connections 4]
                                       [--warmup-seconds 2]

The three services run as processes (harness.MqstoreServices, async flush, uvloop), once
plaintext and once with a `tls` section (a self-signed P-256 certificate made here with the
openssl CLI, TLS 1.3 as negotiated by Python's defaults).  The load comes from aiohttp
clients in this process over keep-alive connections to 127.0.0.1, so handshakes are paid
once per connection and the figures are the steady-state record encryption cost.

Each case first runs `--warmup-seconds` unmeasured (topic creation, first-touch page faults).

  produce   POST /v1/batch, 256 messages of 1 KiB per request, binary results; measured:
            the writer's CPU (user + system, /proc) per message stored
  consume   GET the notifier's pull of 256 messages (base64 JSON) round robin over the 8
            queues, from offset 0 again at each queue's end; measured: the notifier's CPU
            per message answered

Printed: per case and mode, messages/s and server µs per message (median of the runs, min-max
beside it), and the difference TLS makes.  JSON goes to bench/results/tls_cost-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import harness
from harness import BODY

sys.path.append(str(Path(__file__).parents[1]))
from mqstore.client import OutgoingMessage
from mqstore.services.common.http.batch_wire import BATCH_MEDIA_TYPE, RESULT_MEDIA_TYPE, BatchCodec

TOPIC = "BenchTls"
QUEUES = 8
BATCH = 256
PULL_MESSAGES = 256
STORE = {"flush_mode": "async", "segment_size_bytes": 256 << 20}
"""As bench/http_produce.py: 256 MiB segments, so a run never waits on a segment's creation."""



def self_signed(directory: Path) -> dict[str, str]:
    cert, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return {"cert_file": str(cert), "key_file": str(key), "ca_file": str(cert)}


async def produce(url: str, context: ssl.SSLContext | None, *, connections: int,
                  seconds: float) -> int:
    batch = BatchCodec.encode([OutgoingMessage(TOPIC, BODY, queue_id=index % QUEUES)
                               for index in range(BATCH)])
    headers = {"Content-Type": BATCH_MEDIA_TYPE, "Accept": RESULT_MEDIA_TYPE}
    deadline = time.monotonic() + seconds
    done = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(
            limit=connections, ssl=context if context is not None else True)) as session:

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                async with session.post(f"{url}/v1/batch", data=batch,
                                        headers=headers) as answer:
                    assert answer.status == 200, await answer.text()
                    await answer.read()
                done += BATCH

        await asyncio.gather(*(worker() for _ in range(connections)))
    return done


async def consume(url: str, context: ssl.SSLContext | None, *, connections: int,
                  seconds: float) -> int:
    deadline = time.monotonic() + seconds
    offsets = [0] * QUEUES
    received = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(
            limit=connections, ssl=context if context is not None else True)) as session:

        async def worker(first: int) -> None:
            nonlocal received
            queue_id = first
            while time.monotonic() < deadline:
                params = {"offset": offsets[queue_id], "max_messages": PULL_MESSAGES}
                async with session.get(
                        f"{url}/v1/topics/{TOPIC}/queues/{queue_id}/messages",
                        params=params) as answer:
                    document = json.loads(await answer.read())
                received += len(document["messages"])
                at_end = document["next_offset"] >= document["max_offset"]
                offsets[queue_id] = 0 if at_end else document["next_offset"]
                queue_id = (queue_id + 1) % QUEUES

        await asyncio.gather(*(worker(index % QUEUES) for index in range(connections)))
    return received


def measure(tls: dict[str, str] | None, *, seconds: float, warmup_seconds: float,
            connections: int) -> dict[str, tuple[float, float]]:
    """One run on fresh services: {case: (messages/s, server µs per message)}."""
    services = harness.MqstoreServices(store=STORE, tls=tls)
    services.start()
    try:
        results = {}
        for case, service, load in (("produce", "writer", produce),
                                    ("consume", "notifier", consume)):
            asyncio.run(load(services.url(service), services.ssl_context,
                             connections=connections, seconds=warmup_seconds))
            before = services.cpu_seconds()[service]
            started = time.monotonic()
            count = asyncio.run(load(services.url(service), services.ssl_context,
                                     connections=connections, seconds=seconds))
            elapsed = time.monotonic() - started
            used = services.cpu_seconds()[service] - before
            results[case] = (count / elapsed, used / count * 1e6)
            if case == "produce":
                time.sleep(2)  # let the indexer dispatch what was produced
        return results
    finally:
        services.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--warmup-seconds", type=float, default=2.0)
    arguments = parser.parse_args()
    harness.install_uvloop()
    conditions = harness.Conditions.now()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mqstore-tls-bench-") as directory:
        modes = {"plaintext": None, "tls": self_signed(Path(directory))}
        runs = {mode: [measure(tls, seconds=arguments.seconds,
                               warmup_seconds=arguments.warmup_seconds,
                               connections=arguments.connections)
                       for _ in range(arguments.runs)] for mode, tls in modes.items()}
    for case in ("produce", "consume"):
        medians = {}
        for mode, measured in runs.items():
            rates = [run[case][0] for run in measured]
            costs = [run[case][1] for run in measured]
            medians[mode] = statistics.median(costs)
            print(f"{case:<8} {mode:<9} {statistics.median(rates):>9,.0f} msg/s  "
                  f"{medians[mode]:6.2f} µs/msg server CPU ({min(costs):.2f}-{max(costs):.2f})")
            rows.append({"case": case, "mode": mode, "msg_per_s": rates,
                         "server_us_per_msg": costs})
        print(f"{case:<8} TLS adds {medians['tls'] - medians['plaintext']:+.2f} µs/msg")
    conditions.finish()
    print(conditions.describe())
    print(f"results: {harness.write_results('tls_cost', conditions, vars(arguments), rows)}")


if __name__ == "__main__":
    main()
