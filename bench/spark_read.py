"""Rows/s through the `mqstore` data source against Spark's native Parquet scan of the same
messages, in the same run and the same Spark session.

1. Write N messages through the engine (`MessageStore.put_batch`): several topics and queues,
   tags, keys, bodies of `--body-bytes`.
2. Export them once to Parquet with the data source (every column, snappy), so both scans
   see exactly the same rows and columns.
3. Time full scans materialised with the `noop` sink (every column is produced, nothing is
   written): the data source as configured by default (`verifyCrc` on: each body's CRC
   checked), the data source with `verifyCrc` off, then Parquet, in turn, after one warm-up
   of each; `--runs` times.  Medians and min–max are printed, with the ratio to Parquet and
   what `verifyCrc` costs.

    .venv/bin/python bench/spark_read.py                    # 1,000,000 messages, 3 runs
    .venv/bin/python bench/spark_read.py --messages 200000 --runs 2

The machine's load average is printed before and after: on a shared 2-core machine other
jobs move these numbers by tens of percent between runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mqstore.pipeline.session import build_session
from mqstore.storage import Message, MessageStore, StoreConfig

TOPICS = ("Orders", "Payments", "Clicks", "Logs")


def write_store(directory: Path, *, messages: int, body_bytes: int, segment_mib: int) -> float:
    config = StoreConfig.for_small_segments(segment_mib << 20,
                                            consume_queue_file_size_bytes=6_000_000,
                                            index_hash_slot_count=250_000,
                                            index_count_max=1_000_000)
    body = bytes(range(256)) * (body_bytes // 256) + bytes(body_bytes % 256)
    started = time.perf_counter()
    with MessageStore.open(directory, config) as store:
        for first in range(0, messages, 256):
            batch = [Message(TOPICS[i % 4], i % 8, body, f"tag{i % 10}", (f"order-{i}",))
                     for i in range(first, min(messages, first + 256))]
            results = store.put_batch(batch)
            assert results[-1].ok, results[-1]
    return time.perf_counter() - started


def timed_scan(frame: object) -> float:
    started = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()  # type: ignore[attr-defined]
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--segment-mib", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--directory", type=Path, default=None,
                        help="scratch directory (default: a temporary one, removed after)")
    arguments = parser.parse_args()
    if arguments.runs < 2:
        parser.error("--runs must be at least 2 (medians of one run say little)")
    scratch = arguments.directory or Path(tempfile.mkdtemp(prefix="mqstore-spark-bench-"))
    print(f"load average before: {os.getloadavg()}", flush=True)
    try:
        return run(arguments, scratch)
    finally:
        print(f"load average after: {os.getloadavg()}")
        if arguments.directory is None:
            shutil.rmtree(scratch, ignore_errors=True)


def run(arguments: argparse.Namespace, scratch: Path) -> int:
    store, parquet = scratch / "store", scratch / "parquet"
    seconds = write_store(store, messages=arguments.messages, body_bytes=arguments.body_bytes,
                          segment_mib=arguments.segment_mib)
    print(f"wrote {arguments.messages:,} messages of {arguments.body_bytes} B through the "
          f"engine in {seconds:.1f} s", flush=True)
    spark = build_session(app_name="mqstore-bench", master=arguments.master, conf={
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "2g"})
    spark.sparkContext.setLogLevel("ERROR")
    source = spark.read.format("mqstore").load(str(store))
    unchecked = spark.read.format("mqstore").option("verifyCrc", "false").load(str(store))
    source.write.parquet(str(parquet))
    native = spark.read.parquet(str(parquet))
    rows = native.count()
    assert rows == arguments.messages == source.count(), "the two scans must see the same rows"
    print(f"partitions: data source {source.rdd.getNumPartitions()}, parquet "
          f"{native.rdd.getNumPartitions()}", flush=True)
    frames = {"data source": source, "no verifyCrc": unchecked, "parquet": native}
    for frame in frames.values():
        timed_scan(frame)
    times: dict[str, list[float]] = {name: [] for name in frames}
    for run_number in range(arguments.runs):
        for name, frame in frames.items():
            times[name].append(timed_scan(frame))
        listed = ", ".join(f"{name} {values[-1]:.2f} s" for name, values in times.items())
        print(f"run {run_number + 1}: {listed}", flush=True)
    rates = {name: [rows / t for t in values] for name, values in times.items()}
    for name, values in rates.items():
        print(f"{name:>12}: median {statistics.median(values):>12,.0f} rows/s "
              f"(min {min(values):,.0f}, max {max(values):,.0f}) over {len(values)} runs")
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print(f"data source / parquet (medians): {medians['data source'] / medians['parquet']:.2f}")
    print(f"data source / no verifyCrc (medians): "
          f"{medians['data source'] / medians['no verifyCrc']:.2f}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
