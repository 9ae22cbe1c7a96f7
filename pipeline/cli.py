"""`mqstore pipeline export|stats|verify|reindex`: the Spark jobs from the command line.

    mqstore pipeline export  STORE OUT [--overwrite | --mode append] [--topics A,B]
    mqstore pipeline stats   STORE [--json] [--topics A,B]
    mqstore pipeline verify  STORE
    mqstore pipeline reindex STORE OUT [--store-option name=value ...]

Every job runs on `local[*]` unless `--master` says otherwise (`spark://...`, `k8s://...`,
`yarn`), or takes spark-submit's master when spark-submit started it:

    spark-submit --master k8s://https://API:6443 ... .../mqstore/pipeline/cli.py verify /data

Exit codes, as `mqstore`'s: 0 success, 1 corrupt store or failed job, 2 bad input.  Bad
input is refused before Spark starts where it can be (an export into an existing local path
takes well under a second to refuse, not a JVM's start and a job); a job that fails is one
line naming Spark's reason, not a traceback.  On a terminal, Spark's console progress bar
shows each stage, and the JVM logs only errors (`--log-level` to see more).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mqstore.storage.errors import StoreError

if TYPE_CHECKING:
    from mqstore.pipeline.job_stats import QueueStats  # pyspark: only when a job runs

EXIT_CORRUPT = 1
EXIT_USAGE = 2
JOB_LOG_LEVEL_DEFAULT = "ERROR"
"""Spark's WARN lines on a laptop (native libraries, loopback host names) tell a user of
the jobs nothing they can act on; errors still show."""


def add_subcommands(parser: argparse.ArgumentParser) -> None:
    """Fill `parser` (the `pipeline` sub-command's) with the jobs and their arguments."""
    jobs = parser.add_subparsers(dest="job", required=True)
    export = jobs.add_parser("export", help="messages to Parquet, partitioned by topic, date")
    export.add_argument("store", type=Path)
    export.add_argument("output", help="the Parquet directory (a path or URL Spark writes)")
    export.add_argument("--mode", choices=("errorifexists", "overwrite", "append"),
                        default="errorifexists",
                        help="when OUT exists: refuse (default), replace it, or add to it")
    export.add_argument("--overwrite", action="store_true",
                        help="replace OUT if it exists (the same as --mode overwrite)")
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
        job.add_argument("--log-level", default=JOB_LOG_LEVEL_DEFAULT,
                         choices=("ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"),
                         help="the JVM's log level for the job (default: %(default)s)")
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
    """Run the job `arguments.job`; bad input raises `ValueError` or `FileExistsError` (exit 2
    in `main`), before Spark starts where it can; a failed Spark job is one line on stderr
    and exit 1."""
    store = _store(arguments.store)
    conf = _pairs(arguments.conf, "--conf")
    if arguments.job == "export":
        arguments.mode = export_mode(arguments)
        refuse_existing_output(arguments.output, mode=arguments.mode)
    from mqstore.pipeline.session import build_session  # noqa: PLC0415 (pyspark on use)

    spark = build_session(app_name=f"mqstore-{arguments.job}", master=arguments.master,
                          conf=conf, log_level=arguments.log_level)
    handler = {"export": _export, "stats": _stats, "verify": _verify,
               "reindex": _reindex}[arguments.job]
    try:
        return handler(spark, store, arguments)
    except Exception as error:
        reason = spark_failure(error)
        if reason is None:
            raise
        print(f"mqstore pipeline {arguments.job}: the Spark job failed: {reason}",
              file=sys.stderr)
        return EXIT_CORRUPT


def export_mode(arguments: argparse.Namespace) -> str:
    """`--overwrite` is `--mode overwrite`; with another `--mode` it is a contradiction."""
    if not arguments.overwrite:
        return str(arguments.mode)
    if arguments.mode not in ("errorifexists", "overwrite"):
        raise ValueError(f"--overwrite with --mode {arguments.mode}: give one of them")
    return "overwrite"


def refuse_existing_output(output: str, *, mode: str) -> None:
    """An export that would fail on an existing output fails now, not after starting a JVM
    and reading the store (89 s measured): for a local path (no scheme, or file:)."""
    if mode != "errorifexists":
        return
    parsed = urllib.parse.urlparse(output)
    if parsed.scheme not in ("", "file"):
        return  # another file system: job_export.py asks Spark's before the job runs
    if Path(parsed.path if parsed.scheme else output).exists():
        raise FileExistsError(f"{output} exists: give --overwrite to replace it, or "
                              f"--mode append to add to it")


def spark_failure(error: BaseException) -> str | None:
    """Spark's reason for a failed job, on one line; None for an error not Spark's."""
    module = type(error).__module__
    if not module.startswith(("pyspark", "py4j")):
        return None
    java_exception = getattr(error, "java_exception", None)
    text = str(java_exception) if java_exception is not None else str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


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
    for line in stats_lines(rows):
        print(line)
    return 0


def stats_lines(rows: Sequence[QueueStats]) -> list[str]:
    """The text of `stats`: the store time range of all queues, then one line per queue
    with its own range (UTC, to the millisecond)."""
    if not rows:
        return ["no messages"]
    first_ms = min(row.first_store_ms for row in rows)
    last_ms = max(row.last_store_ms for row in rows)
    lines = [f"stored from {_utc(first_ms)} to {_utc(last_ms)}",
             f"{'topic':<24}{'queue':>6}{'messages':>11}{'body bytes':>14}{'offsets':>22}"
             f"{'gaps':>6}{'missing':>9}{'dups':>6}  {'first stored':<25}{'last stored'}"]
    for row in rows:
        offsets = f"[{row.min_queue_offset}, {row.max_queue_offset}]"
        lines.append(f"{row.topic:<24}{row.queue_id:>6}{row.messages:>11}{row.body_bytes:>14}"
                     f"{offsets:>22}{row.gaps:>6}{row.missing_offsets:>9}"
                     f"{row.duplicate_offsets:>6}  {_utc(row.first_store_ms):<25}"
                     f"{_utc(row.last_store_ms)}")
    return lines


def _utc(timestamp_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{timestamp_ms % 1000:03d}Z"


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
    from mqstore.storage.dispatch.tag_evidence import index_tags_for_store  # noqa: PLC0415

    options = {f"store.{key}": value for key, value in
               _pairs(arguments.store_option, "--store-option").items()}
    config = store_config_from_options(options, directory=Path(store))
    if arguments.queue_tasks < 1:
        raise ValueError(f"--queue-tasks {arguments.queue_tasks}: must be at least 1")
    settings = ReindexSettings(
        consume_queue_file_size_bytes=config.consume_queue_file_size_bytes,
        index_enabled=config.index_enabled, index_hash_slot_count=config.index_hash_slot_count,
        index_count_max=config.index_count_max,
        index_tags=index_tags_for_store(Path(store), config),  # as the store's index holds
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
