"""The 2021 Tianchi race's workload at reduced scale, beside this machine's fdatasync bandwidth.

    .venv/bin/python bench/race.py [--writers 20 --topics 10 --queues 500 --write-mib 512
                                    --read-write-mib 256 --readers 10 --runs 1 --dir DIR]

One run of the four cases takes 2–3 minutes here (15–25 s per case, 10 s of limits each).

The contest (the 2021 Tianchi race), scaled down: `--writers` threads `append` payloads of
uniform random size in [100 B, 17 KiB] (slices of an os.urandom pool: incompressible) to
`--queues` queues spread over `--topics` topics; each queue belongs to one writer (the contest's
threads own their topics), which picks among its queues at random.

  write phase   the writers append `--write-mib` MiB.
  read phase    half the queues (chosen at random) are read from offset 0, half from their
                next offset at the phase start; `--readers` threads call get_range with
                fetch_num uniform in [10, 100] while the writers append `--read-write-mib`
                MiB more.  The phase ends when every queue is read to its final end.

Every payload is verified byte for byte: the writer records (pool start, size) for the offset
it is about to get (it owns the queue, so it knows it), and each reader compares every
returned body with that slice of the pool.  A wrong answer stops the run.

Cases, interleaved within each run so VM drift hits all alike: read cache off/on
(`--cache-mib` MiB, prefetch on) × group commit alignment off/on (4 KiB).  Limits
(`sync_limits.py`), measured after each case on the same filesystem: append + fdatasync in a
loop for
`--sync-seconds` s, with blocks of 256 KiB and of the case's mean group size (bytes per
group-commit fdatasync), into a growing file ("append") and into a pre-zeroed one
("overwrite": what the engine's preallocated segments see); and alignment's effect on the
device alone: groups of about that size written as they are or padded to 4 KiB, alternating
in 0.1 s slices (paired, so drift cancels), payload MB/s of each.

Store: 256 MiB segments (preallocated the default way), sync flush, pool off, in-process
dispatch (get_range reads the consume queues), index off (the race looks nothing up by key).
Figures are medians of `--runs` (every run is in the JSON); MB is 10^6 bytes of payload.  The
machine is a shared 2-core VM whose fdatasync latency drifts 2–10× by the minute.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from sync_limits import measure_limits, prezero

from mqstore.storage import FlushMode, MessageStore, StoreConfig
from mqstore.storage.race import RaceStore

PAYLOAD_MIN_BYTES = 100
PAYLOAD_MAX_BYTES = 17 * 1024
FETCH_MIN, FETCH_MAX = 10, 100
POOL_BYTES = 8 << 20
SEGMENT_BYTES = 256 << 20
RESULTS = Path(__file__).parent / "results"
CASES = (("cache off, align off", False, 0), ("cache on, align off", True, 0),
         ("cache off, align 4K", False, 4096), ("cache on, align 4K", True, 4096))


class Workload:
    """Queues, their owners, what each offset must hold, and the reader positions."""

    def __init__(self, arguments: argparse.Namespace, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pool = os.urandom(POOL_BYTES)
        self.queues = [(f"topic{q % arguments.topics}", q // arguments.topics)
                       for q in range(arguments.queues)]
        self.expected: list[list[tuple[int, int]]] = [[] for _ in self.queues]
        """Per queue, per offset: (start in the pool, size) of the payload."""
        self.writers = arguments.writers
        self.failure: str | None = None

    def payload_at(self, queue: int, offset: int) -> memoryview:
        start, size = self.expected[queue][offset]
        return memoryview(self.pool)[start:start + size]


def write(store: MessageStore, load: Workload, writer: int, quota_bytes: int,
          seed: int) -> tuple[int, int]:
    """Append until `quota_bytes` of payload; return (bytes, messages)."""
    rng = random.Random(seed)
    mine = list(range(writer, len(load.queues), load.writers))
    written = messages = 0
    while written < quota_bytes and load.failure is None:
        queue = rng.choice(mine)
        size = rng.randint(PAYLOAD_MIN_BYTES, PAYLOAD_MAX_BYTES)
        start = rng.randrange(POOL_BYTES - size)
        predicted = len(load.expected[queue])
        load.expected[queue].append((start, size))  # before: a reader may see it at once
        topic, queue_id = load.queues[queue]
        offset = store.append(topic, queue_id, load.pool[start:start + size])
        if offset != predicted:
            load.failure = f"{topic}/{queue_id}: append returned {offset}, not {predicted}"
        written += size
        messages += 1
    return written, messages


def read(store: MessageStore, load: Workload, queues: list[int], positions: dict[int, int],
         writers_done: threading.Event, seed: int) -> tuple[int, int]:
    """get_range every queue to its final end; verify every body; return (bytes, messages)."""
    rng = random.Random(seed)
    total_bytes = total_messages = 0
    pending = list(queues)
    while pending and load.failure is None:
        finished = writers_done.is_set()  # read before the pass: ends seen after are final
        progressed = False
        for queue in list(pending):
            topic, queue_id = load.queues[queue]
            offset = positions[queue]
            got = store.get_range(topic, queue_id, offset, rng.randint(FETCH_MIN, FETCH_MAX))
            for index, body in got.items():
                if body != load.payload_at(queue, offset + index):
                    load.failure = f"{topic}/{queue_id} offset {offset + index}: wrong bytes"
                total_bytes += len(body)
            total_messages += len(got)
            positions[queue] = offset + len(got)
            progressed |= bool(got)
            if finished and positions[queue] == len(load.expected[queue]):
                pending.remove(queue)
        if not progressed:
            time.sleep(0.001)
    return total_bytes, total_messages


def run_threads(targets: list[threading.Thread]) -> None:
    for thread in targets:
        thread.start()
    for thread in targets:
        thread.join()


def write_phase(store: MessageStore, load: Workload, quota_bytes: int,
                seed: int) -> tuple[float, int, int]:
    results: list[tuple[int, int]] = []
    share = quota_bytes // load.writers

    def writer(w: int) -> None:
        results.append(write(store, load, w, share, seed + w))

    started = time.perf_counter()
    run_threads([threading.Thread(target=writer, args=(w,)) for w in range(load.writers)])
    return time.perf_counter() - started, sum(r[0] for r in results), sum(r[1] for r in results)


def read_phase(store: MessageStore, load: Workload, arguments: argparse.Namespace,
               seed: int) -> dict[str, float]:
    """Half the queues from the head, half from the tail, while the writers go on."""
    order = list(range(len(load.queues)))
    load.rng.shuffle(order)
    heads = set(order[:len(order) // 2])
    positions = {q: 0 if q in heads else len(load.expected[q]) for q in order}
    writers_done = threading.Event()
    written: list[tuple[int, int]] = []
    reads: list[tuple[int, int]] = []
    share = (arguments.read_write_mib << 20) // load.writers
    write_elapsed = [0.0]

    def writers() -> None:
        def writer(w: int) -> None:
            written.append(write(store, load, w, share, seed + w))

        run_threads([threading.Thread(target=writer, args=(w,)) for w in range(load.writers)])
        write_elapsed[0] = time.perf_counter() - started
        writers_done.set()

    def reader(r: int) -> None:
        mine = order[r::arguments.readers]
        reads.append(read(store, load, mine, positions, writers_done, seed + 1000 + r))

    started = time.perf_counter()
    run_threads([threading.Thread(target=writers)]
                + [threading.Thread(target=reader, args=(r,)) for r in range(arguments.readers)])
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "write_seconds": write_elapsed[0],
            "write_bytes": sum(w[0] for w in written), "write_messages": sum(w[1] for w in written),
            "read_bytes": sum(r[0] for r in reads), "read_messages": sum(r[1] for r in reads)}


def run_case(directory: Path, arguments: argparse.Namespace, *, cache: bool, align: int,
             seed: int) -> dict[str, object]:
    config = StoreConfig.for_small_segments(
        SEGMENT_BYTES, flush_mode=FlushMode.SYNC, index_enabled=False,
        group_commit_align_bytes=align, read_cache_enabled=cache,
        read_cache_capacity_bytes=arguments.cache_mib << 20)
    load = Workload(arguments, seed)
    store = RaceStore.open(directory / "store", config)
    try:
        store.append("Warmup", 0, b"untimed: waits for the first segment's preallocation")
        phases: dict[str, object] = {}
        for name in ("write", "read"):
            syncs = store.store.group_commit_stats.syncs_total
            flushed = store.store.flushed_position
            if name == "write":
                seconds, payload, messages = write_phase(store, load, arguments.write_mib << 20,
                                                         seed)
                phase: dict[str, float] = {"seconds": seconds, "write_seconds": seconds,
                                           "write_bytes": payload, "write_messages": messages}
            else:
                phase = read_phase(store, load, arguments, seed + 10_000)
            if load.failure is not None:
                raise AssertionError(load.failure)
            phase["syncs"] = store.store.group_commit_stats.syncs_total - syncs
            phase["log_bytes"] = store.store.flushed_position - flushed
            phases[name] = phase
        stats = store.store.group_commit_stats
        cache_stats = store.cache.stats() if store.cache is not None else None
    finally:
        store.close()
        shutil.rmtree(directory / "store")
    return {"phases": phases, "padding_bytes": stats.padding_bytes_total,
            "padding_count": stats.padding_count,
            "cache": vars(cache_stats) if cache_stats is not None else None}


def summarize(result: dict[str, object], limits: dict[str, float]) -> dict[str, float]:
    """The figures of one case's run: MB/s of payload, msgs/s, group size, ratios."""
    phases = result["phases"]
    assert isinstance(phases, dict)
    write, read = phases["write"], phases["read"]
    syncs = write["syncs"] + read["syncs"]
    group_bytes = (write["log_bytes"] + read["log_bytes"]) / max(syncs, 1)
    write_mb_s = write["write_bytes"] / 1e6 / write["seconds"]
    cache = result["cache"]
    hit = (cache["hits"] / max(cache["hits"] + cache["misses"], 1)  # type: ignore[index]
           if isinstance(cache, dict) else float("nan"))
    log_bytes = write["log_bytes"] + read["log_bytes"]
    padding = result["padding_bytes"]
    assert isinstance(padding, int)
    return {
        "total_s": write["seconds"] + read["seconds"],
        "write_mb_s": write_mb_s,
        "write_msg_s": write["write_messages"] / write["seconds"],
        "read_phase_s": read["seconds"],
        "read_phase_write_mb_s": read["write_bytes"] / 1e6 / read["write_seconds"],
        "read_mb_s": read["read_bytes"] / 1e6 / read["seconds"],
        "read_msg_s": read["read_messages"] / read["seconds"],
        "group_kib": group_bytes / 1024,
        "syncs_s": write["syncs"] / write["seconds"],
        "padding_pct": 100 * padding / max(log_bytes, 1),
        "cache_hit_pct": 100 * hit,
        "write_vs_append_256k": write_mb_s / limits["append_256k"],
        "write_vs_overwrite_group": write_mb_s / limits["overwrite_group"],
        "padded_vs_unaligned_limit": limits["overwrite_padded"] / limits["overwrite_unaligned"],
        **{f"limit_{name}_mb_s": value for name, value in limits.items()},
    }


COLUMNS = (("total_s", "total s", "{:.1f}"), ("write_mb_s", "write MB/s", "{:.1f}"),
           ("write_msg_s", "write msg/s", "{:,.0f}"),
           ("read_phase_write_mb_s", "2nd write MB/s", "{:.1f}"),
           ("read_mb_s", "read MB/s", "{:.1f}"), ("read_msg_s", "read msg/s", "{:,.0f}"),
           ("group_kib", "group KiB", "{:.0f}"), ("syncs_s", "syncs/s", "{:.0f}"),
           ("padding_pct", "pad %", "{:.2f}"), ("cache_hit_pct", "hit %", "{:.0f}"),
           ("limit_overwrite_group_mb_s", "lim ow@grp", "{:.0f}"),
           ("limit_overwrite_unaligned_mb_s", "ow unal", "{:.0f}"),
           ("limit_overwrite_padded_mb_s", "ow pad", "{:.0f}"),
           ("padded_vs_unaligned_limit", "pad÷unal", "{:.2f}"),
           ("limit_append_group_mb_s", "lim ap@grp", "{:.0f}"),
           ("limit_append_256k_mb_s", "lim ap@256K", "{:.0f}"),
           ("write_vs_overwrite_group", "÷ ow@grp", "{:.2f}"),
           ("write_vs_append_256k", "÷ ap@256K", "{:.2f}"))


def print_table(medians: dict[str, dict[str, float]]) -> None:
    print(f"{'case':<22}" + "".join(f"{title:>{max(len(title), 9) + 1}}"
                                    for _, title, _ in COLUMNS))
    for case, figures in medians.items():
        print(f"{case:<22}" + "".join(
            f"{form.format(figures[key]):>{max(len(title), 9) + 1}}"
            for key, title, form in COLUMNS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=20)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--queues", type=int, default=500)
    parser.add_argument("--write-mib", type=int, default=512)
    parser.add_argument("--read-write-mib", type=int, default=256)
    parser.add_argument("--readers", type=int, default=10)
    parser.add_argument("--cache-mib", type=int, default=256)
    parser.add_argument("--sync-seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--cases", default="0,1,2,3", help="indexes into " + repr(CASES))
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--dir", type=Path, default=None)
    arguments = parser.parse_args()
    assert 10 <= arguments.writers <= 50 and arguments.topics <= 100
    assert arguments.queues <= 5000 and arguments.queues >= arguments.writers
    cases = [CASES[int(index)] for index in arguments.cases.split(",")]
    directory = Path(tempfile.mkdtemp(prefix="mqstore-race-", dir=arguments.dir))
    runs: dict[str, list[dict[str, object]]] = {name: [] for name, _, _ in cases}
    try:
        prezeroed = prezero(directory, 1 << 30)
        for run in range(arguments.runs):
            for name, cache, align in cases[run % len(cases):] + cases[:run % len(cases)]:
                result = run_case(directory, arguments, cache=cache, align=align,
                                  seed=arguments.seed + run)
                phases = result["phases"]
                assert isinstance(phases, dict)
                syncs = phases["write"]["syncs"] + phases["read"]["syncs"]
                group = (phases["write"]["log_bytes"] + phases["read"]["log_bytes"]) // syncs
                limits = measure_limits(directory, prezeroed, group, arguments.sync_seconds)
                result["figures"] = summarize(result, limits)
                runs[name].append(result)
                figures = result["figures"]
                assert isinstance(figures, dict)
                print(f"run {run} {name}: total {figures['total_s']:.1f} s, write "
                      f"{figures['write_mb_s']:.1f} MB/s, read {figures['read_mb_s']:.1f} MB/s,"
                      f" group {figures['group_kib']:.0f} KiB, fdatasync overwrite@group "
                      f"{limits['overwrite_group']:.0f} MB/s", flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    medians = {name: {key: statistics.median(r["figures"][key] for r in results)  # type: ignore[index]
                      for key in results[0]["figures"]}  # type: ignore[union-attr]
               for name, results in runs.items()}
    print(f"\nmedians of {arguments.runs} run(s); payload MB = 10^6 B; lim = append+fdatasync "
          f"MB/s (ow: overwrite of a pre-zeroed file, ap: appending; @grp: blocks of the "
          f"case's mean group size)")
    print_table(medians)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"race-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"arguments": {k: str(v) for k, v in vars(arguments).items()},
                               "medians": medians, "runs": runs}, indent=1, default=str))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
