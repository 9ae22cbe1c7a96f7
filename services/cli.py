"""The `mqstore` command line.

    mqstore produce DIR [--count N] ...   the embedded main job: write, read back, report
    mqstore produce --url URL [...]       send to a running writer (progress on stderr)
    mqstore consume --url URL --group G --topic T   poll and commit from a notifier
    mqstore inspect DIR                   segments, positions, records, checkpoint, queues, index
    mqstore verify DIR                    CRC scrub; exit 1 naming every corrupt offset
    mqstore pipeline JOB ...              Spark jobs: export, stats, verify, reindex
    mqstore writer --config FILE          run the commitlog-writer service until SIGTERM
        [--role follower --master HOST:PORT]   (or sync_master / async_master)
    mqstore indexer --config FILE         run the reput/indexer service until SIGTERM
    mqstore notifier --config FILE        run the pull-notifier service until SIGTERM
    mqstore up --data DIR                 all three services as processes on DIR; Ctrl-C stops
    mqstore preallocate --config FILE     create and preallocate a new store's first segment

Exit codes: 0 success, 1 the store is corrupt (verify) or the job failed, 2 bad input
(argparse's own convention for usage errors, kept for every input error).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from tqdm import tqdm

from mqstore.services.admin.parser import add_admin
from mqstore.services.up import UP_PORTS
from mqstore.storage import (
    ConfigError,
    FlushMode,
    Message,
    MessageStore,
    StoreError,
    StoreLockedError,
)
from mqstore.storage.files.checkpoint import read_checkpoint
from mqstore.storage.recovery.scrub import (
    scan_consume_queues,
    scan_index,
    scan_store,
    segment_paths,
    verify_store,
)
from mqstore.storage.store_sizes import embedded_config

EXIT_CORRUPT = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input on the command line: message to stderr, exit 2."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    arguments = parser.parse_args(argv)
    try:
        code: int = arguments.handler(arguments)
    except (UsageError, ConfigError) as error:
        print(f"mqstore {arguments.command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as error:
        print(f"mqstore {arguments.command}: {error}", file=sys.stderr)
        return EXIT_CORRUPT
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqstore", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    produce = commands.add_parser("produce", help="write messages: into an embedded store "
                                  "(DIR) or to a running writer (--url)")
    produce.add_argument("directory", type=Path, nargs="?")
    produce.add_argument("--url", help="a writer service, e.g. http://127.0.0.1:8081")
    produce.add_argument("--topic", default="Demo")
    produce.add_argument("--queues", type=int, default=4, help="queue ids 0..N-1")
    produce.add_argument("--count", type=int, default=100_000)
    produce.add_argument("--body-bytes", type=int, default=1024)
    produce.add_argument("--batch", type=int, default=32, help="messages per put_batch")
    produce.add_argument("--segment-mib", type=int, default=64)
    produce.add_argument("--flush", choices=[m.value for m in FlushMode], default="async")
    produce.add_argument("--pool", action="store_true", help="use the transient store pool")
    produce.set_defaults(handler=_produce)

    consume = commands.add_parser("consume", help="poll and commit a topic for a consumer "
                                  "group from a notifier service")
    consume.add_argument("--url", required=True, help="a notifier, e.g. http://127.0.0.1:8083")
    consume.add_argument("--group", required=True)
    consume.add_argument("--topic", required=True)
    consume.add_argument("--count", type=int, default=None,
                         help="stop after N messages (default: when a poll comes back empty)")
    consume.add_argument("--wait-ms", type=int, default=1000, help="long-poll wait per poll")
    consume.add_argument("--print", action="store_true", dest="print_messages",
                         help="one JSON line per message on stdout")
    consume.set_defaults(handler=_consume)

    inspect = commands.add_parser("inspect", help="describe a store directory (read-only)")
    inspect.add_argument("directory", type=Path)
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.set_defaults(handler=_inspect)

    verify = commands.add_parser("verify", help="CRC-check every record (read-only)")
    verify.add_argument("directory", type=Path)
    verify.set_defaults(handler=_verify)

    writer = commands.add_parser("writer", help="run the commitlog-writer service")
    writer.add_argument("--config", type=Path, required=True,
                        help="the services' YAML config file (MQSTORE_* variables override it)")
    writer.add_argument("--role", choices=("async_master", "sync_master", "follower"),
                        help="replication role (store.role); default: the config file's")
    writer.add_argument("--master", metavar="HOST:PORT",
                        help="a follower's master: its replication port (replication.master)")
    writer.set_defaults(handler=_writer)

    up = commands.add_parser("up", help="run writer, indexer and notifier on one directory")
    up.add_argument("--data", type=Path, required=True, help="the store directory")
    up.add_argument("--config", type=Path, default=None,
                    help="the services' YAML config file (default: only --data)")
    up.add_argument("--host", default="127.0.0.1", help="listen address of every listener")
    for name, port in UP_PORTS.items():
        up.add_argument(f"--{name}-port", type=_port, default=port,
                        help=f"the {name}'s port (default {port})")
    up.set_defaults(handler=_up)
    _add_pipeline(commands)
    add_admin(commands)  # mqstore admin: services/admin/
    indexer = commands.add_parser("indexer", help="run the reput/indexer service")
    indexer.add_argument("--config", type=Path, required=True,
                         help="the services' YAML config file (MQSTORE_* variables override it)")
    indexer.set_defaults(handler=_indexer)

    notifier = commands.add_parser("notifier", help="run the pull-notifier service")
    notifier.add_argument("--config", type=Path, required=True,
                          help="the services' YAML config file (MQSTORE_* variables override it)")
    notifier.set_defaults(handler=_notifier)
    _add_preallocate(commands)
    return parser


def _positive(value: int, name: str) -> int:
    if value <= 0:
        raise UsageError(f"{name} must be positive, got {value}")
    return value


def _produce(arguments: argparse.Namespace) -> int:
    count = _positive(arguments.count, "--count")
    batch = _positive(arguments.batch, "--batch")
    if (arguments.directory is None) == (arguments.url is None):
        raise UsageError("give a store directory (embedded) or --url (a writer), not both")
    if arguments.url is not None:
        return _produce_over_http(arguments, count=count, batch=batch)
    queues = _positive(arguments.queues, "--queues")
    # The embedded profile (storage/store_sizes.py), at --segment-mib for a new store; an
    # existing store keeps the sizes its files were made with.
    config = embedded_config(
        arguments.directory,
        segment_size_bytes=_positive(arguments.segment_mib, "--segment-mib") << 20,
        flush_mode=FlushMode(arguments.flush), pool_enabled=arguments.pool)
    body = bytes(range(256)) * (arguments.body_bytes // 256) + bytes(arguments.body_bytes % 256)
    started = time.perf_counter()
    with MessageStore.open(arguments.directory, config) as store:
        first_position = store.written_position
        written = 0
        while written < count:
            size = min(batch, count - written)
            messages = [Message(arguments.topic, (written + i) % queues, body,
                                keys=(f"key-{written + i}",)) for i in range(size)]
            results = store.put_batch(messages) if size > 1 else [store.put(messages[0])]
            if not results[-1].ok:
                raise StoreError(f"put failed: {results[-1].status.name}: {results[-1].reason}")
            written += size
        elapsed = time.perf_counter() - started
        read_back = sum(1 for _ in store.iter_messages(first_position))
        recovery = store.recovery_report.mode.value
    megabytes = written * arguments.body_bytes / 1e6
    print(f"wrote {written} messages ({megabytes:.1f} MB of bodies) in {elapsed:.2f} s: "
          f"{written / elapsed:,.0f} msg/s, {megabytes / elapsed:,.1f} MB/s "
          f"(recovery on open: {recovery}); read back {read_back}")
    return 0 if read_back == written else EXIT_CORRUPT


def _produce_over_http(arguments: argparse.Namespace, *, count: int, batch: int) -> int:
    from mqstore.client import MqstoreError  # noqa: PLC0415 (lazy: HTTP stack)
    from mqstore.services.terminal import produce_over_http  # noqa: PLC0415

    try:
        return produce_over_http(arguments.url, topic=arguments.topic, count=count,
                                 body_bytes=_positive(arguments.body_bytes, "--body-bytes"),
                                 batch=batch, say=print)
    except MqstoreError as error:
        raise UsageError(str(error)) from None


def _consume(arguments: argparse.Namespace) -> int:
    from mqstore.client import MqstoreError  # noqa: PLC0415 (lazy: HTTP stack)
    from mqstore.services.terminal import consume_over_http  # noqa: PLC0415

    count = None if arguments.count is None else _positive(arguments.count, "--count")
    try:
        return consume_over_http(arguments.url, group=arguments.group, topic=arguments.topic,
                                 count=count, wait_ms=_positive(arguments.wait_ms, "--wait-ms"),
                                 print_messages=arguments.print_messages,
                                 say=lambda line: print(line, file=sys.stderr))
    except MqstoreError as error:
        raise UsageError(str(error)) from None


def _existing_store(directory: Path) -> Path:
    if not directory.is_dir():
        raise UsageError(f"{directory}: no such directory")
    if not (directory / "commitlog").is_dir():
        raise UsageError(f"{directory}: not a store (no commitlog/ directory)")
    return directory


def _inspect(arguments: argparse.Namespace) -> int:
    directory = _existing_store(arguments.directory)
    summaries = list(scan_store(directory, verify_crc=False))
    values, state = read_checkpoint(directory / "checkpoint")
    lock = directory / "lock"
    report = {
        "directory": str(directory),
        "segment_size_bytes": summaries[0].size_bytes if summaries else None,
        "segments": [{"name": s.name, "records": s.record_count,
                      "written_position": s.written_position,
                      "ends_with_blank": s.ends_with_blank,
                      "first_store_time": _time(s.first_store_timestamp_ms),
                      "last_store_time": _time(s.last_store_timestamp_ms),
                      "problems": [f"{c.physical_offset}: {c.reason}" for c in s.corruptions]}
                     for s in summaries],
        "min_position": summaries[0].start_position if summaries else 0,
        "written_position": max((s.written_position for s in summaries if s.record_count),
                            default=0),
        "record_count": sum(s.record_count for s in summaries),
        "checkpoint": {"state": state.value, **dataclasses.asdict(values)},
        "consume_queues": [dataclasses.asdict(q) for q in scan_consume_queues(directory)],
        "index": dataclasses.asdict(scan_index(directory)),
        "abort_marker": (directory / "abort").exists(),
        "lock": lock.read_text().strip() if lock.exists() else None,
    }
    if arguments.json:
        print(json.dumps(report, indent=2))
        return 0
    _print_inspect(report)
    return 0


def _time(timestamp_ms: int) -> str | None:
    if not timestamp_ms:
        return None
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds")


def _print_inspect(report: Mapping[str, object]) -> None:
    print(f"store {report['directory']}  segment size {report['segment_size_bytes']} bytes")
    print(f"log [{report['min_position']}, {report['written_position']})  "
          f"records {report['record_count']}  abort marker "
          f"{'PRESENT (unclean shutdown)' if report['abort_marker'] else 'absent'}")
    print(f"checkpoint {report['checkpoint']}")
    print(f"{'segment':<22}{'records':>9}{'data end':>14}  blank  last store time")
    segments = report["segments"]
    assert isinstance(segments, list)
    for segment in segments:
        print(f"{segment['name']:<22}{segment['records']:>9}{segment['written_position']:>14}"
              f"  {'yes' if segment['ends_with_blank'] else 'no ':<5}  "
              f"{segment['last_store_time'] or '-'}")
        for problem in segment["problems"]:
            print(f"    problem at {problem}")
    queues = report["consume_queues"]
    assert isinstance(queues, list)
    print(f"consume queues: {len(queues)}")
    for queue in queues:
        print(f"  {queue['topic']}/{queue['queue_id']}: offsets [{queue['min_offset']}, "
              f"{queue['max_offset']}) in {queue['file_count']} file(s)")
    print(f"index: {report['index']}")


def _verify(arguments: argparse.Namespace) -> int:
    directory = _existing_store(arguments.directory)
    total_bytes = sum(path.stat().st_size for path in segment_paths(directory))
    with tqdm(total=total_bytes, unit="B", unit_scale=True, desc="verify",
              file=sys.stderr, disable=None) as bar:

        def advance(size_bytes: int) -> None:
            bar.update(size_bytes)

        summaries, corruptions = verify_store(directory, progress=advance)
    records = sum(s.record_count for s in summaries)
    if corruptions:
        for corruption in corruptions:
            print(f"CORRUPT at {corruption}")
        print(f"{len(corruptions)} damaged place(s) in {directory}; {records} records "
              f"verified", file=sys.stderr)
        return EXIT_CORRUPT
    print(f"OK: {records} records in {len(summaries)} segments, every body CRC matches")
    return 0


def _writer(arguments: argparse.Namespace) -> int:
    # Imported here: the other commands need neither aiohttp nor prometheus-client.
    from mqstore.services.common.config_file import load_config  # noqa: PLC0415
    from mqstore.services.writer import run_writer  # noqa: PLC0415
    from mqstore.services.writer.run import with_role  # noqa: PLC0415
    from mqstore.storage import BrokerRole  # noqa: PLC0415

    config = with_role(load_config(arguments.config),
                       role=BrokerRole(arguments.role) if arguments.role else None,
                       master=arguments.master)
    try:
        return run_writer(config)
    except StoreLockedError as error:
        raise UsageError(str(error)) from None


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1..65535)")
    return int(text)


def _up(arguments: argparse.Namespace) -> int:
    from mqstore.services.up import UpOptions, run_up  # noqa: PLC0415 (no aiohttp for others)

    ports = {name: getattr(arguments, f"{name}_port") for name in UP_PORTS}
    if len(set(ports.values())) != len(ports):
        raise UsageError(f"the services need different ports, got {ports}")
    if arguments.config is not None and not arguments.config.is_file():
        raise UsageError(f"--config {arguments.config}: no such file")
    options = UpOptions(data_dir=arguments.data.resolve(), ports=ports, host=arguments.host,
                        config=arguments.config)
    return run_up(options, say=lambda line: print(f"mqstore up: {line}", flush=True))


def _add_pipeline(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from mqstore.pipeline.cli import add_subcommands  # noqa: PLC0415 (argparse only)

    pipeline = commands.add_parser("pipeline", help="Spark jobs: export, stats, verify, "
                                   "reindex (see mqstore pipeline -h)")
    add_subcommands(pipeline)
    pipeline.set_defaults(handler=_pipeline)


def _pipeline(arguments: argparse.Namespace) -> int:
    # Only this command imports pyspark, and only once a job runs.
    from mqstore.pipeline.cli import run  # noqa: PLC0415

    try:
        return run(arguments)
    except (ValueError, FileExistsError) as error:
        raise UsageError(str(error)) from None


def _indexer(arguments: argparse.Namespace) -> int:
    from mqstore.services.common.config_file import load_config  # noqa: PLC0415
    from mqstore.services.indexer.run import run_indexer  # noqa: PLC0415

    config = load_config(arguments.config)
    try:
        return run_indexer(config)
    except StoreLockedError as error:
        raise UsageError(str(error)) from None


def _notifier(arguments: argparse.Namespace) -> int:
    # Imported here: the other commands need neither aiohttp nor prometheus-client.
    from mqstore.services.common.config_file import load_config  # noqa: PLC0415
    from mqstore.services.notifier import run_notifier  # noqa: PLC0415

    return run_notifier(load_config(arguments.config))


def _add_preallocate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    preallocate = commands.add_parser("preallocate", help="create and preallocate a new "
                                      "store's first commit log segment")
    preallocate.add_argument("--config", type=Path, required=True, help="its YAML config file")
    preallocate.set_defaults(handler=_preallocate)


def _preallocate(arguments: argparse.Namespace) -> int:
    from mqstore.services.common.config_file import load_config  # noqa: PLC0415
    from mqstore.services.preallocate import preallocate_first_segment  # noqa: PLC0415

    print(preallocate_first_segment(load_config(arguments.config)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
