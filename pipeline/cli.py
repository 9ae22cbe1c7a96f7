"""`mqstore pipeline export|stats|verify|reindex`: the Spark jobs from the command line.

    mqstore pipeline export  STORE OUT [--mode overwrite] [--topics A,B]
    mqstore pipeline stats   STORE [--json] [--topics A,B]
    mqstore pipeline verify  STORE
    mqstore pipeline reindex STORE OUT [--store-option name=value ...]

Every job runs on `local[*]` unless `--master` says otherwise (`spark://...`, `k8s://...`,
`yarn`), or takes spark-submit's master when spark-submit started it:

    spark-submit --master k8s://https://API:6443 ... .../mqstore/pipeline/cli.py verify /data

Exit codes, as `mqstore`'s: 0 success, 1 corrupt store or failed job, 2 bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from mqstore.storage.errors import StoreError

EXIT_CORRUPT = 1
EXIT_USAGE = 2


def add_subcommands(parser: argparse.ArgumentParser) -> None:
    """Fill `parser` (the `pipeline` sub-command's) with the jobs and their arguments."""
    jobs = parser.add_subparsers(dest="job", required=True)
    export = jobs.add_parser("export", help="messages to Parquet, partitioned by topic, date")
    export.add_argument("store", type=Path)
    export.add_argument("output", help="the Parquet directory (a path or URL Spark writes)")
    export.add_argument("--mode", choices=("errorifexists", "overwrite", "append"),
                        default="errorifexists")
    stats = jobs.add_parser("stats", help="per topic/queue counts, bytes, times and gaps")
    stats.add_argument("store", type=Path)
    stats.add_argument("--json", action="store_true", help="one JSON object per queue")
    verify = jobs.add_parser("verify", help="CRC-check every record, in parallel")
    verify.add_argument("store", type=Path)
    reindex = jobs.add_parser("reindex", help="rebuild consume queues and index into OUT")
    reindex.add_argument("store", type=Path)
    reindex.add_argument("output", type=Path)
    reindex.add_argument("--store-option", action="append", default=[], metavar="NAME=VALUE",
                         help="a StoreConfig field (repeatable); sizes are read from the "
                              "store, and the index counts are needed only for an index of a "
                              "length no profile of the project writes")
    reindex.add_argument("--queue-tasks", type=int, default=8)
    for job in (export, stats, verify, reindex):
        job.add_argument("--master", default=None,
                         help="Spark master (default: spark-submit's, else local[*])")
        job.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                         help="a Spark setting (repeatable)")
    for job in (export, stats):
        job.add_argument("--topics", default=None, help="comma-separated topics (default all)")


def _pairs(items: Sequence[str], what: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} {item!r}: expected NAME=VALUE")
        pairs[key] = value
    return pairs


def _store(path: Path) -> str:
    if not (path / "commitlog").is_dir():
        raise ValueError(f"{path}: not a store (no commitlog/ directory)")
    return str(path.resolve())


def run(arguments: argparse.Namespace) -> int:
    """Run the job `arguments.job`; bad input raises `ValueError` (exit 2 in `main`)."""
    store = _store(arguments.store)
    conf = _pairs(arguments.conf, "--conf")
    from mqstore.pipeline.session import build_session  # noqa: PLC0415 (pyspark on use)

    spark = build_session(app_name=f"mqstore-{arguments.job}", master=arguments.master,
                          conf=conf)
    handler = {"export": _export, "stats": _stats, "verify": _verify,
               "reindex": _reindex}[arguments.job]
    return handler(spark, store, arguments)


def _read_options(arguments: argparse.Namespace) -> dict[str, str]:
    return {"topics": arguments.topics} if arguments.topics else {}


def _export(spark: object, store: str, arguments: argparse.Namespace) -> int:
    from mqstore.pipeline.job_export import export  # noqa: PLC0415

    result = export(spark, store, arguments.output, mode=arguments.mode,  # type: ignore[arg-type]
                    options=_read_options(arguments))
    print(f"exported to {result.output}: {result.rows} rows there now")
    return 0


def _stats(spark: object, store: str, arguments: argparse.Namespace) -> int:
    from mqstore.pipeline.job_stats import queue_stats  # noqa: PLC0415

    rows = queue_stats(spark, store, options=_read_options(arguments))  # type: ignore[arg-type]
    if arguments.json:
        for row in rows:
            print(json.dumps(dataclasses.asdict(row)))
        return 0
    print(f"{'topic':<24}{'queue':>6}{'messages':>11}{'body bytes':>14}{'offsets':>22}"
          f"{'gaps':>6}{'missing':>9}{'dups':>6}")
    for row in rows:
        offsets = f"[{row.min_queue_offset}, {row.max_queue_offset}]"
        print(f"{row.topic:<24}{row.queue_id:>6}{row.messages:>11}{row.body_bytes:>14}"
              f"{offsets:>22}{row.gaps:>6}{row.missing_offsets:>9}{row.duplicate_offsets:>6}")
    return 0


def _verify(spark: object, store: str, arguments: argparse.Namespace) -> int:
    from mqstore.pipeline.job_verify import verify  # noqa: PLC0415

    result = verify(spark, store)  # type: ignore[arg-type]
    for corruption in result.corruptions:
        print(f"CORRUPT at {corruption}")
    if not result.clean:
        print(f"{len(result.corruptions)} corrupt record(s) in {store}; {result.records} "
              f"records verified", file=sys.stderr)
        return EXIT_CORRUPT
    print(f"OK: {result.records} records in {result.segments} segments, every body CRC "
          f"matches")
    return 0


def _reindex(spark: object, store: str, arguments: argparse.Namespace) -> int:
    from mqstore.pipeline.job_reindex import ReindexSettings, reindex  # noqa: PLC0415
    from mqstore.pipeline.store_config import store_config_from_options  # noqa: PLC0415

    options = {f"store.{key}": value for key, value in
               _pairs(arguments.store_option, "--store-option").items()}
    config = store_config_from_options(options, directory=Path(store))
    if arguments.queue_tasks < 1:
        raise ValueError(f"--queue-tasks {arguments.queue_tasks}: must be at least 1")
    settings = ReindexSettings(
        consume_queue_file_size_bytes=config.consume_queue_file_size_bytes,
        index_enabled=config.index_enabled, index_hash_slot_count=config.index_hash_slot_count,
        index_count_max=config.index_count_max, index_tags=config.index_tags_enabled,
        queue_tasks=arguments.queue_tasks)
    result = reindex(spark, store, str(arguments.output), settings)  # type: ignore[arg-type]
    print(f"reindexed into {arguments.output}: {result.queue_entries} consume queue entries, "
          f"{result.index_keys} index keys in {result.index_files} index file(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point for spark-submit (`.../mqstore/pipeline/cli.py JOB ...`)."""
    parser = argparse.ArgumentParser(prog="mqstore pipeline", description=__doc__.splitlines()[0])
    add_subcommands(parser)
    arguments = parser.parse_args(argv)
    try:
        return run(arguments)
    except (ValueError, FileExistsError) as error:
        print(f"mqstore pipeline {arguments.job}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as error:
        print(f"mqstore pipeline {arguments.job}: {error}", file=sys.stderr)
        return EXIT_CORRUPT


if __name__ == "__main__":
    sys.exit(main())
