"""`mqstore up --groups N`: a RocketMQ cluster on one machine, a name server and N broker
groups, for development and tests.

    namesrv    mqstore namesrv --host H --port <remoting-port>   the one address for clients
    group g    writer, indexer, notifier as `mqstore up` runs them, on <data>/g<g>; the
               notifier registers broker `mqstore-g<g>` (broker id 0, cluster DefaultCluster)
               with that name server, advertising the group's own remoting address

Ports: the name server takes `--remoting-port`; group g (0..N-1) takes every base port plus
GROUP_PORT_STRIDE·(g+1).  With the defaults:

| group | writer | indexer | notifier | forward | remoting |
|-------|--------|---------|----------|---------|----------|
| g0    | 8091   | 8092    | 8093     | 8095    | 9886     |
| g1    | 8101   | 8102    | 8103     | 8105    | 9896     |
| g15   | 8241   | 8242    | 8243     | 8245    | 10036    |

Base ports whose differences are multiples of the stride would put two listeners on one
port: the layout is checked whole before anything starts (one line, exit 2), and every
port of it is tried as `up` tries its own.

Start: the name server, until it answers GET_BROKER_CLUSTER_INFO (106) (a notifier that
found no name server would register again only after `remoting.register_interval_ms`);
then the indexers of every group, their writers, their notifiers, each stage once all of
it answers /readyz; "up" once the name server's cluster info lists every group's broker at
its remoting address.  Stop: every notifier, every writer, every indexer (one group's order,
all groups at once), the name server last.  Every process is restarted if it dies, as in
`up`; a restarted name server is empty until the brokers register again: within two rounds
of `remoting.register_interval_ms` (30 s each; the first finds its old connection closed).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from collections.abc import Callable

from mqstore.services.cli.up import (
    EXIT_FAILED,
    EXIT_USAGE,
    START_ORDER,
    STOP_ORDER,
    BrokerRegistration,
    Supervisor,
    UpError,
    UpOptions,
    check_ports_free,
    reachable_host,
    supervise,
)
from mqstore.services.common.process.parent_death import ENV_PARENT_PID

GROUPS_MAX = 16
"""A group's three processes are about 250 MiB resident when idle (writer 125 MiB with 64 MiB
segments, indexer and notifier 60 MiB each): 16 groups are 48 processes and 4 GiB."""
GROUP_PORT_STRIDE = 10
"""Group g's ports are the base ports + 10·(g+1): the defaults (8081-8085, 9876) keep their
last digit, so `ss -ltn` reads as a table."""
CLUSTER_NAME = "DefaultCluster"
"""RocketMQ's default cluster name, which `mqadmin updateTopic -c` and clients expect."""
BROKER_NAME_PREFIX = "mqstore-g"
NAMESRV = "namesrv"
CLUSTER_INFO_TIMEOUT_S = 2.0
"""One GET_BROKER_CLUSTER_INFO: a local name server answers in milliseconds."""
CLUSTER_INFO_SIZE_BYTES_MAX = 1 << 20
"""Cluster info of 16 groups is about 2 KiB; a longer answer is not a name server's."""


def group_layout(options: UpOptions, *, group_count: int) -> list[UpOptions]:
    """Each group's options: data dir `<data>/g<g>`, ports, broker.  UpError (exit 2) if two
    listeners would share a port or a port passes 65535."""
    assert 2 <= group_count <= GROUPS_MAX
    namesrv_address = f"{reachable_host(options.host)}:{options.ports['remoting']}"
    groups = [dataclasses.replace(
        options, data_dir=options.data_dir / f"g{index}",
        ports={name: port + GROUP_PORT_STRIDE * (index + 1)
               for name, port in options.ports.items()},
        broker=BrokerRegistration(cluster_name=CLUSTER_NAME,
                                  broker_name=f"{BROKER_NAME_PREFIX}{index}",
                                  namesrv_address=namesrv_address))
        for index in range(group_count)]
    owners = {options.ports["remoting"]: NAMESRV}
    for index, group in enumerate(groups):
        for name, port in group.ports.items():
            owner = f"{name} of g{index}"
            if port > 65535:
                raise UpError(f"--groups {group_count} puts {owner} on port {port}, past "
                              f"65535: choose lower --{name}-port", exit_code=EXIT_USAGE)
            if port in owners:
                raise UpError(f"--groups {group_count} puts {owners[port]} and {owner} on "
                              f"port {port}: choose base ports that do not differ by a "
                              f"multiple of {GROUP_PORT_STRIDE}", exit_code=EXIT_USAGE)
            owners[port] = owner
    return groups


def run_up_groups(options: UpOptions, *, group_count: int,
                  say: Callable[[str], None]) -> int:
    """`run_up` for a name server and `group_count` groups (module docstring)."""
    groups = group_layout(options, group_count=group_count)
    # Named as their options are: a group's port in use is moved with its base option.
    check_ports_free(options.host, {"remoting": options.ports["remoting"]})
    for group in groups:
        check_ports_free(options.host, group.ports)
    for group in groups:
        group.data_dir.mkdir(parents=True, exist_ok=True)
    return supervise(lambda say, stop_requested: Cluster(
        options, groups, say=say, stop_requested=stop_requested), say=say,
        stop_order=f"{', '.join(STOP_ORDER)} of every group, then the name server")


class NameServerSupervisor(Supervisor):
    """`mqstore namesrv` under the same start, restart and stop as a service; ready when it
    answers GET_BROKER_CLUSTER_INFO (it serves no HTTP)."""

    child_stdout = 2  # its "listening on" line goes with the logs, not into `up`'s output

    def address(self) -> str:
        return f"{reachable_host(self.options.host)}:{self.options.ports[NAMESRV]}"

    def _command(self, name: str) -> list[str]:
        assert self.options.config is None  # the name server reads no config file
        return [*super()._command(NAMESRV), "--host", self.options.host,
                "--port", str(self.options.ports[NAMESRV])]

    def _environment(self) -> dict[str, str]:
        return {**os.environ, ENV_PARENT_PID: str(os.getpid())}

    def wait_ready(self, name: str = NAMESRV) -> None:
        self.wait_cluster_info(lambda info: True, waiting_for="answer")

    def wait_registered(self, brokers: dict[str, str]) -> None:
        """Until the cluster info lists each of `brokers` (name: address) as a master."""
        def listed(info: dict[str, object]) -> bool:
            table = info.get("brokerAddrTable")
            return isinstance(table, dict) and all(
                isinstance(table.get(name), dict)
                and table[name].get("brokerAddrs", {}).get("0") == address
                for name, address in brokers.items())
        self.wait_cluster_info(listed, waiting_for=f"list the brokers {sorted(brokers)}")

    def wait_cluster_info(self, done: Callable[[dict[str, object]], bool], *,
                          waiting_for: str) -> None:
        deadline = time.monotonic() + self.options.ready_timeout_s
        child = self._children[NAMESRV]
        while time.monotonic() < deadline and not self._stop_requested():
            code = child.process.poll()
            if code is not None:
                raise UpError(f"the name server exited with status {code} while starting "
                              f"(its log is above)", exit_code=EXIT_USAGE if code == EXIT_USAGE
                              else EXIT_FAILED)
            info = cluster_info(self.address())
            if info is not None and done(info):
                return
            time.sleep(0.1)
        if not self._stop_requested():
            raise UpError(f"the name server at {self.address()} did not {waiting_for} "
                          f"within {self.options.ready_timeout_s:.0f} s", exit_code=EXIT_FAILED)


class Cluster:
    """The name server and the groups' Supervisors, started and stopped stage by stage."""

    def __init__(self, options: UpOptions, groups: list[UpOptions], *,
                 say: Callable[[str], None], stop_requested: Callable[[], bool]) -> None:
        self._say = say
        self._stop_requested = stop_requested
        self.namesrv = NameServerSupervisor(
            dataclasses.replace(options, ports={NAMESRV: options.ports["remoting"]},
                                config=None), say=say, stop_requested=stop_requested)
        self.groups = [Supervisor(group, say=_prefixed(say, f"g{index} "),
                                  stop_requested=stop_requested)
                       for index, group in enumerate(groups)]

    def start(self) -> None:
        self.namesrv.spawn(NAMESRV)
        self.namesrv.wait_ready()
        for name in START_ORDER:
            for group in self.groups:
                if self._stop_requested():
                    return
                group.spawn(name)
            for index, group in enumerate(self.groups):
                try:
                    group.wait_ready(name)
                except UpError as error:
                    raise UpError(f"g{index} {error}", exit_code=error.exit_code) from None
        brokers = {group.options.broker.broker_name:
                   f"{reachable_host(group.options.host)}:{group.options.ports['remoting']}"
                   for group in self.groups if group.options.broker is not None}
        self.namesrv.wait_registered(brokers)
        if self._stop_requested():
            return
        for group in self.groups:
            for name in START_ORDER:
                group.announce(name)
        self._say(f"namesrv  {self.namesrv.address()} (RocketMQ name server of "
                  f"{CLUSTER_NAME}, {len(brokers)} broker groups: setNamesrvAddr)")

    def watch_once(self) -> None:
        self.namesrv.watch_once()
        for group in self.groups:
            group.watch_once()

    def stop(self) -> dict[str, int | None]:
        """Each stage of STOP_ORDER in every group at once, then the name server."""
        codes: dict[str, int | None] = {}
        for name in STOP_ORDER:
            started = [(index, group) for index, group in enumerate(self.groups)
                       if group.terminate(name)]
            for index, group in started:
                codes[f"g{index} {name}"] = group.wait_stopped(name)
        if self.namesrv.terminate(NAMESRV):
            codes[NAMESRV] = self.namesrv.wait_stopped(NAMESRV)
        return codes


def cluster_info(address: str) -> dict[str, object] | None:
    """The GET_BROKER_CLUSTER_INFO (106) answer of the name server at `address` ("host:port"),
    or None if it does not answer it (not listening yet, or not a name server)."""
    # Imported here: the remoting package brings aiohttp, which `mqstore` loads only to serve.
    from mqstore.services.notifier.remoting import frame  # noqa: PLC0415
    from mqstore.services.notifier.remoting.codes import (  # noqa: PLC0415
        GET_BROKER_CLUSTER_INFO,
        SUCCESS,
    )

    host, _, port = address.rpartition(":")
    request = frame.Command(GET_BROKER_CLUSTER_INFO, opaque=1)
    try:
        with socket.create_connection((host, int(port)), timeout=CLUSTER_INFO_TIMEOUT_S) as link:
            link.sendall(b"".join(frame.encode(request)))
            (length,) = frame.LENGTH.unpack(_read_exactly(link, frame.LENGTH.size))
            if length > CLUSTER_INFO_SIZE_BYTES_MAX:
                return None
            answer = frame.decode(_read_exactly(link, length))
        info = json.loads(answer.body) if answer.code == SUCCESS else None
    except (OSError, ValueError):  # FrameError and JSON errors are ValueErrors
        return None
    return info if isinstance(info, dict) else None


def _read_exactly(link: socket.socket, size_bytes: int) -> bytes:
    chunks = []
    while size_bytes:
        chunk = link.recv(size_bytes)
        if not chunk:
            raise ConnectionError("the name server closed the connection before answering")
        chunks.append(chunk)
        size_bytes -= len(chunk)
    return b"".join(chunks)


def _prefixed(say: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda line: say(prefix + line)
