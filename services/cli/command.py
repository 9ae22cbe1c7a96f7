"""The `mqstore` command line.

    mqstore produce DIR [--count N] ...   the embedded main job: write, read back, report
    mqstore produce --url URL [...]       send to a running writer (progress on stderr)
    mqstore consume --url URL --group G --topic T   poll and commit from a notifier
    mqstore inspect DIR                   segments, positions, records, checkpoint, queues, index
    mqstore verify DIR                    CRC scrub; exit 1 naming every corrupt offset
    mqstore pipeline JOB ...              Spark jobs: export, stats, verify, reindex
    mqstore writer [--config FILE]        run the commitlog-writer service until SIGTERM
        [--role follower --master HOST:PORT]   (or sync_master / async_master)
    mqstore indexer [--config FILE]       run the reput/indexer service until SIGTERM
    mqstore notifier [--config FILE]      run the pull-notifier service until SIGTERM
    mqstore up --data DIR                 all three services as processes on DIR; Ctrl-C stops
                                          (services/cli/service_commands.py)
    mqstore preallocate --config FILE     create and preallocate a new store's first segment

Exit codes: 0 success, 1 the store is corrupt (verify) or the job failed, 2 bad input
(argparse's own convention for usage errors, kept for every input error: one line on stderr,
never a traceback), 130 interrupted (Ctrl-C), 141 stdout closed by its reader (`| head`:
the rest of the output is dropped quietly, as a shell tool killed by SIGPIPE would).
`mqstore COMMAND -h` describes every option with its default.
"""

from __future__ import annotations

import argparse
import errno
import json
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Never, NoReturn

from tqdm import tqdm

from mqstore.services.admin.parser import add_admin
from mqstore.services.cli.options import (
    EMBEDDED_DEFAULTS,
    UsageError,
    add_command,
    discard_stdout,
    positive,
    refuse_inapplicable,
)
from mqstore.services.cli.service_commands import add_service_commands
from mqstore.storage import (
    ConfigError,
    FlushMode,
    Message,
    MessageStore,
    StoreConfig,
    StoreError,
)
from mqstore.storage.recovery.scrub import segment_paths, verify_store
from mqstore.storage.store_sizes import embedded_config

EXIT_CORRUPT = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_STDOUT_CLOSED = 128 + signal.SIGPIPE

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


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
    except BrokenPipeError:
        discard_stdout()  # the reader left (`| head`): nothing more can be said to it
        return EXIT_STDOUT_CLOSED
    except KeyboardInterrupt:
        print(f"mqstore {arguments.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqstore", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    _add_produce(commands)
    _add_consume(commands)

    inspect = add_command(commands, "inspect", "describe a store directory (read-only)")
    inspect.add_argument("directory", type=Path, help="the store directory")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.set_defaults(handler=_inspect)

    verify = add_command(commands, "verify", "CRC-check every record (read-only)")
    verify.add_argument("directory", type=Path, help="the store directory")
    verify.add_argument("--quiet", action="store_true", help="no progress bar (it is shown "
                        "on stderr only when stderr is a terminal)")
    verify.set_defaults(handler=_verify)
    add_service_commands(commands)
    _add_pipeline(commands)
    add_admin(commands)  # mqstore admin: services/admin/
    _add_preallocate(commands)
    return parser


def _add_produce(commands: Commands) -> None:
    produce = add_command(commands, "produce", "write messages: into an embedded store (DIR) "
                          "or to a running writer (--url)")
    produce.add_argument("directory", type=Path, nargs="?",
                         help="an embedded store's directory (made if missing)")
    produce.add_argument("--url", help="a writer service, e.g. http://127.0.0.1:8081 "
                         "(default: none, write into DIR)")
    produce.add_argument("--topic", default="Demo", help="the topic written")
    produce.add_argument("--count", type=int, default=100_000, help="messages to write")
    produce.add_argument("--body-bytes", type=int, default=1024, help="each message's body size")
    produce.add_argument("--batch", type=int, default=32, help="messages per put_batch")
    produce.add_argument("--quiet", action="store_true", help="no progress bar (it is shown "
                         "on stderr only when stderr is a terminal)")
    embedded = produce.add_argument_group("embedded store only (refused with --url)")
    embedded.add_argument("--queues", type=int, help=f"queue ids 0..N-1 (default: "
                          f"{EMBEDDED_DEFAULTS['queues']})")
    embedded.add_argument("--segment-mib", type=int, help=f"commit log segment size in MiB "
                          f"(default: {EMBEDDED_DEFAULTS['segment_mib']})")
    embedded.add_argument("--flush", choices=[m.value for m in FlushMode], help=f"flush mode "
                          f"(default: {EMBEDDED_DEFAULTS['flush']})")
    embedded.add_argument("--pool", action="store_true", default=None,
                          help="use the transient store pool (default: off)")
    produce.set_defaults(handler=_produce)


def _add_consume(commands: Commands) -> None:
    consume = add_command(commands, "consume", "poll and commit a topic for a consumer group "
                          "from a notifier service")
    consume.add_argument("--url", required=True, help="a notifier, e.g. http://127.0.0.1:8083")
    consume.add_argument("--group", required=True, help="the consumer group")
    consume.add_argument("--topic", required=True, help="the topic read")
    consume.add_argument("--count", type=int, default=None,
                         help="stop after N messages (default: when a poll comes back empty)")
    consume.add_argument("--wait-ms", type=int, default=1000, help="long-poll wait per poll")
    consume.add_argument("--print", action="store_true", dest="print_messages",
                         help="one JSON line per message on stdout")
    consume.add_argument("--quiet", action="store_true", help="no progress bar (it is shown "
                         "on stderr only when stderr is a terminal)")
    consume.set_defaults(handler=_consume)


def _produce(arguments: argparse.Namespace) -> int:
    count = positive(arguments.count, "--count")
    batch = positive(arguments.batch, "--batch")
    positive(arguments.body_bytes, "--body-bytes")
    if (arguments.directory is None) == (arguments.url is None):
        raise UsageError("give a store directory (embedded) or --url (a writer), not both")
    if arguments.url is not None:
        refuse_inapplicable(arguments, EMBEDDED_DEFAULTS, reason="they shape an embedded "
                            "store; a writer's come from its config")
        return _produce_over_http(arguments, count=count, batch=batch)
    if arguments.directory.exists() and not arguments.directory.is_dir():
        raise UsageError(f"{arguments.directory}: not a directory (give a store directory, "
                         f"new or made by mqstore)")
    for name, default in EMBEDDED_DEFAULTS.items():
        if getattr(arguments, name) is None:
            setattr(arguments, name, default)
    queues = positive(arguments.queues, "--queues")
    # The embedded profile (storage/store_sizes.py), at --segment-mib for a new store; an
    # existing store keeps the sizes its files were made with.
    config = embedded_config(
        arguments.directory,
        segment_size_bytes=positive(arguments.segment_mib, "--segment-mib") << 20,
        flush_mode=FlushMode(arguments.flush), pool_enabled=arguments.pool)
    body = bytes(range(256)) * (arguments.body_bytes // 256) + bytes(arguments.body_bytes % 256)
    started = time.perf_counter()
    with _open_store(arguments.directory, config) as store, \
            _progress(count, "produce", quiet=arguments.quiet) as bar:
        first_position = store.written_position
        written = 0
        while written < count:
            size = min(batch, count - written)
            messages = [Message(arguments.topic, (written + i) % queues, body,
                                keys=(f"key-{written + i}",)) for i in range(size)]
            results = store.put_batch(messages) if size > 1 else [store.put(messages[0])]
            if not results[-1].ok:
                _put_failed(results[-1].status.name, results[-1].reason)
            written += size
            bar.update(size)
        bar.close()
        elapsed = time.perf_counter() - started
        with _progress(written, "read back", quiet=arguments.quiet) as reading:
            read_back = 0
            for _ in store.iter_messages(first_position):
                read_back += 1
                reading.update(1)
        recovery = store.recovery_report.mode.value
    megabytes = written * arguments.body_bytes / 1e6
    print(f"wrote {written} messages ({megabytes:.1f} MB of bodies) in {elapsed:.2f} s: "
          f"{written / elapsed:,.0f} msg/s, {megabytes / elapsed:,.1f} MB/s "
          f"(recovery on open: {recovery}); read back {read_back}")
    return 0 if read_back == written else EXIT_CORRUPT


def _put_failed(status: str, reason: str) -> NoReturn:
    """A message the options made illegal (a bad --topic, a --body-bytes over the store's
    maximum) is bad input; anything else is the store's failure."""
    if status == "MESSAGE_ILLEGAL":
        raise UsageError(reason)
    raise StoreError(f"put failed: {status}: {reason}")


def _open_store(directory: Path, config: StoreConfig) -> MessageStore:
    """The embedded store; a directory the user cannot use is a usage error, not a crash."""
    try:
        return MessageStore.open(directory, config)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EIO, errno.EDQUOT):
            raise StoreError(f"{directory}: {error.strerror or error}") from None
        raise UsageError(f"{error.filename or directory}: {error.strerror or error}") from None


def _progress(total: int, unit: str, *, quiet: bool) -> tqdm[Never]:
    """A progress bar on stderr, shown only when stderr is a terminal (`disable=None`) and
    not `--quiet`: piped output and logs stay clean."""
    return tqdm(total=total, unit=" msg", desc=unit, file=sys.stderr, unit_scale=True,
                disable=True if quiet else None, leave=False)


def _produce_over_http(arguments: argparse.Namespace, *, count: int, batch: int) -> int:
    from mqstore.client import MqstoreError  # noqa: PLC0415 (lazy: HTTP stack)
    from mqstore.services.cli.terminal import produce_over_http  # noqa: PLC0415

    try:
        return produce_over_http(arguments.url, topic=arguments.topic, count=count,
                                 body_bytes=arguments.body_bytes, batch=batch, say=print,
                                 quiet=arguments.quiet)
    except (MqstoreError, ValueError) as error:  # ValueError: a URL that is not one
        raise UsageError(f"--url {arguments.url}: {error}") from None


def _consume(arguments: argparse.Namespace) -> int:
    from mqstore.client import MqstoreError  # noqa: PLC0415 (lazy: HTTP stack)
    from mqstore.services.cli.terminal import consume_over_http  # noqa: PLC0415

    count = None if arguments.count is None else positive(arguments.count, "--count")
    try:
        return consume_over_http(arguments.url, group=arguments.group, topic=arguments.topic,
                                 count=count, wait_ms=positive(arguments.wait_ms, "--wait-ms"),
                                 print_messages=arguments.print_messages,
                                 say=lambda line: print(line, file=sys.stderr),
                                 quiet=arguments.quiet)
    except (MqstoreError, ValueError) as error:  # ValueError: a URL that is not one
        raise UsageError(f"--url {arguments.url}: {error}") from None


def _existing_store(directory: Path) -> Path:
    if not directory.exists():
        raise UsageError(f"{directory}: no such directory")
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a directory (give a store directory)")
    if not (directory / "commitlog").is_dir():
        raise UsageError(f"{directory}: not a store (no commitlog/ directory)")
    return directory


def _inspect(arguments: argparse.Namespace) -> int:
    from mqstore.services.cli.inspect_report import inspect_report, print_report  # noqa: PLC0415

    report = inspect_report(_existing_store(arguments.directory))
    if arguments.json:
        print(json.dumps(report, indent=2))
        return 0
    print_report(report)
    return 0


def _verify(arguments: argparse.Namespace) -> int:
    directory = _existing_store(arguments.directory)
    total_bytes = sum(path.stat().st_size for path in segment_paths(directory))
    with tqdm(total=total_bytes, unit="B", unit_scale=True, desc="verify",
              file=sys.stderr, disable=True if arguments.quiet else None) as bar:

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


def _add_preallocate(commands: Commands) -> None:
    preallocate = add_command(commands, "preallocate", "create and preallocate a new "
                              "store's first commit log segment")
    preallocate.add_argument("--config", type=Path, required=True, help="its YAML config file")
    preallocate.set_defaults(handler=_preallocate)


def _preallocate(arguments: argparse.Namespace) -> int:
    from mqstore.services.cli.preallocate import preallocate_first_segment  # noqa: PLC0415
    from mqstore.services.common.settings.config_file import load_config  # noqa: PLC0415

    print(preallocate_first_segment(load_config(arguments.config)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
