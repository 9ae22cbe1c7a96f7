"""The commands that run services: `mqstore writer`, `indexer`, `notifier` (one service each,
as a Broker pod's containers run them), `mqstore up` (all three as its children) and
`mqstore namesrv` (the name server, a process of its own: services/namesrv/).

A service started by `up` dies with it (services/common/process/parent_death.py).  A store lock or
a port another process holds is a usage error: one line, exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
from collections.abc import Callable
from pathlib import Path

from mqstore.services.cli.options import UsageError, add_command
from mqstore.services.cli.up_groups import GROUP_PORT_STRIDE, GROUPS_MAX
from mqstore.services.common.process.local_ports import UP_PORTS
from mqstore.storage import StoreLockedError

UP_PORT_HELP = {
    "writer": "the writer's HTTP port", "indexer": "the indexer's HTTP port",
    "notifier": "the notifier's HTTP port",
    "remoting": "the notifier's RocketMQ remoting port (name server and broker; with "
                "--groups, the name server's)",
    "forward": "the writer's port for the sends the remoting front forwards"}
assert UP_PORT_HELP.keys() == UP_PORTS.keys()


def add_service_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]
                         ) -> None:
    writer = _service_command(commands, "writer", "run the commitlog-writer service")
    writer.add_argument("--role", choices=("async_master", "sync_master", "follower"),
                        help="replication role (store.role); default: the config file's")
    writer.add_argument("--master", metavar="HOST:PORT",
                        help="a follower's master: its replication port (default: the "
                             "config file's replication.master)")
    writer.set_defaults(handler=_writer)
    _service_command(commands, "indexer", "run the reput/indexer service").set_defaults(
        handler=_indexer)
    _service_command(commands, "notifier", "run the pull-notifier service").set_defaults(
        handler=_notifier)

    _add_namesrv(commands)

    up = add_command(commands, "up", "run writer, indexer and notifier on one directory "
                     "until Ctrl-C, SIGTERM or SIGHUP; they never outlive it")
    up.add_argument("--data", type=Path, required=True,
                    help="the store directory (with --groups N: group g's is <data>/g<g>)")
    up.add_argument("--config", type=Path, default=None,
                    help="the services' YAML config file (default: none, settings from "
                         "--data and MQSTORE_* variables)")
    up.add_argument("--host", default="127.0.0.1", help="listen address of every listener")
    for name, port in UP_PORTS.items():
        up.add_argument(f"--{name}-port", type=_port, default=port, help=UP_PORT_HELP[name])
    up.add_argument("--groups", type=int, default=1, metavar="N",
                    help=f"broker groups, 1 to {GROUPS_MAX}: with N of 2 or more, a name "
                         f"server on --remoting-port and N groups registered with it, group "
                         f"g (0..N-1) on <data>/g<g> with each base port + "
                         f"{GROUP_PORT_STRIDE}*(g+1), broker mqstore-g<g>")
    up.set_defaults(handler=_up)


def _add_namesrv(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`mqstore namesrv`: one option per NamesrvSettings field (docs/namesrv.md)."""
    from mqstore.services.namesrv.settings import NamesrvSettings  # noqa: PLC0415

    namesrv = add_command(commands, "namesrv", "run RocketMQ's name server (brokers register, "
                          "clients ask for routes) until SIGTERM")
    for field in dataclasses.fields(NamesrvSettings):
        option = f"--{field.name.replace('_', '-')}"
        if field.type == "bool":
            namesrv.add_argument(option, action=argparse.BooleanOptionalAction,
                                 default=field.default, help=f"default: {field.default}")
        else:
            namesrv.add_argument(option, type=int if field.type == "int" else str,
                                 default=field.default, help=f"default: {field.default}")
    namesrv.add_argument("--log-level", default="INFO", help="default: INFO")
    namesrv.set_defaults(handler=_namesrv)


def _namesrv(arguments: argparse.Namespace) -> int:
    from mqstore.services.namesrv.run import run_namesrv  # noqa: PLC0415
    from mqstore.services.namesrv.settings import (  # noqa: PLC0415
        NamesrvConfigError,
        NamesrvSettings,
    )

    try:
        settings = NamesrvSettings(**{field.name: getattr(arguments, field.name)
                                      for field in dataclasses.fields(NamesrvSettings)})
        return _run_service(lambda: run_namesrv(settings, log_level=arguments.log_level))
    except NamesrvConfigError as error:  # a bad option, or a TLS file that cannot be loaded
        raise UsageError(str(error)) from None


def _service_command(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                     name: str, summary: str) -> argparse.ArgumentParser:
    service = add_command(commands, name, f"{summary} until SIGTERM")
    service.add_argument("--config", type=Path, default=None,
                         help="the services' YAML config file (MQSTORE_* variables override "
                              "it; default: none, settings from MQSTORE_* variables, "
                              "MQSTORE_DATA_DIR required)")
    return service


def _writer(arguments: argparse.Namespace) -> int:
    # Imported here: the other commands need neither aiohttp nor prometheus-client.
    from mqstore.services.common.settings.config_file import load_config  # noqa: PLC0415
    from mqstore.services.writer import run_writer  # noqa: PLC0415
    from mqstore.services.writer.run import with_role  # noqa: PLC0415
    from mqstore.storage import BrokerRole  # noqa: PLC0415

    config = with_role(load_config(arguments.config),
                       role=BrokerRole(arguments.role) if arguments.role else None,
                       master=arguments.master)
    return _run_service(lambda: run_writer(config))


def _indexer(arguments: argparse.Namespace) -> int:
    from mqstore.services.common.settings.config_file import load_config  # noqa: PLC0415
    from mqstore.services.indexer.run import run_indexer  # noqa: PLC0415

    config = load_config(arguments.config)
    return _run_service(lambda: run_indexer(config))


def _notifier(arguments: argparse.Namespace) -> int:
    from mqstore.services.common.settings.config_file import load_config  # noqa: PLC0415
    from mqstore.services.notifier import run_notifier  # noqa: PLC0415

    config = load_config(arguments.config)
    return _run_service(lambda: run_notifier(config))


def _run_service(run: Callable[[], int]) -> int:
    """Run a service: under `mqstore up` it dies with `up`; a lock or a port another process
    holds is one line and exit 2, not a traceback."""
    from mqstore.services.common.process.parent_death import (  # noqa: PLC0415
        follow_parent_from_environment,
    )

    follow_parent_from_environment()
    try:
        return run()
    except StoreLockedError as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        raise UsageError(f"cannot listen: {error}") from None


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1..65535)")
    return int(text)


def _up(arguments: argparse.Namespace) -> int:
    from mqstore.services.cli.up import UpError, UpOptions, run_up  # noqa: PLC0415 (no aiohttp)

    ports = {name: getattr(arguments, f"{name}_port") for name in UP_PORTS}
    if len(set(ports.values())) != len(ports):
        raise UsageError(f"the services need different ports, got {ports}")
    if arguments.data.exists() and not arguments.data.is_dir():
        raise UsageError(f"--data {arguments.data}: not a directory")
    if arguments.config is not None and not arguments.config.is_file():
        raise UsageError(f"--config {arguments.config}: no such file")
    if not 1 <= arguments.groups <= GROUPS_MAX:
        raise UsageError(f"--groups must be 1 to {GROUPS_MAX}, got {arguments.groups}")
    options = UpOptions(data_dir=arguments.data.resolve(), ports=ports, host=arguments.host,
                        config=arguments.config)
    say = lambda line: print(f"mqstore up: {line}", flush=True)  # noqa: E731
    try:
        if arguments.groups == 1:
            return run_up(options, say=say)
        from mqstore.services.cli.up_groups import run_up_groups  # noqa: PLC0415

        return run_up_groups(options, group_count=arguments.groups, say=say)
    except UpError as error:
        raise UsageError(str(error)) from None
