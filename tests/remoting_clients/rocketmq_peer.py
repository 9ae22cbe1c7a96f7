"""Apache RocketMQ 5.5.0's name server and one broker, on loopback, as a context manager.

The jars come from Maven Central (`java/peer/pom.xml`, built into `.cache/` by
maven_build.py); each process runs with `java -cp` and its own temporary directory:

    java ... org.apache.rocketmq.namesrv.NamesrvStartup -c TMP/namesrv.conf
    java ... org.apache.rocketmq.broker.BrokerStartup   -c TMP/broker.conf

Both bind 127.0.0.1 (`bindAddress`) and the broker announces `brokerIP1=127.0.0.1`, so it never
guesses an address of its own.  The broker listens on three ports: `listenPort`, the VIP channel
at `listenPort - 2` and, for replicas, the HA port at `listenPort + 1`.  RocketMQ gives the HA
acceptor no bind address (it listens on every interface), but with no replica configured
nothing ever connects to it; all traffic stays on 127.0.0.1.

Typical use::

    with RocketMqPeer.start(flush="async") as peer:
        peer.namesrv      # "127.0.0.1:PORT", for setNamesrvAddr / mqadmin -n
        peer.pids         # [namesrv pid, broker pid], for the benchmark's CPU accounting
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.remoting_clients.delay_levels import ROCKETMQ_PROPERTY, TEST_DELAY_LEVELS
from tests.remoting_clients.maven_build import REPO_ROOT, BuildError, build
from tests.remoting_clients.raw_remoting import broker_addresses, has_route
from tests.remoting_clients.transaction_checks import TRANSACTION_CHECK_PROPERTIES

PEER_PROJECT = REPO_ROOT / "tests" / "remoting_clients" / "java" / "peer"
ROCKETMQ_PEER_VERSION = "5.5.0"
FLUSH_DISK_TYPES = {"async": "ASYNC_FLUSH", "sync": "SYNC_FLUSH"}
START_TIMEOUT_S = 180.0
"""Each JVM prints its boot line after about 10 s on an idle two-core machine; far more when
the machine is shared, so the bound is generous."""
STOP_TIMEOUT_S = 60.0
AUTO_CREATE_TEMPLATE_TOPIC = "TBW102"
PORT_TRIES_MAX = 50

# Java 9+ only lets RocketMQ unmap its mapped files (MappedFile.clean) with these opens.
JVM_OPTIONS = (
    "-XX:+UseSerialGC",
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
)
NAMESRV_HEAP = "-Xmx256m"
BROKER_HEAP = "-Xmx512m"
BROKER_NAME = "broker-a"
CLUSTER_NAME = "DefaultCluster"


TLS_JVM_OPTIONS = ("-Dtls.server.mode=enforcing",)
"""`RocketMqPeer.start(tls=True)`: both JVMs serve only TLS (`tls.server.mode=enforcing`),
with the certificate RocketMQ makes itself (`tls.test.mode.enable`, true by default); the
broker's own client (its registrations) uses TLS because the mode is enforcing (its
`NettyClientConfig.useTLS` defaults to that)."""


def unverified_tls() -> ssl.SSLContext:
    """A TLS client that checks no certificate (the peer's is made at its start)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


DIE_WITH_PARENT = ("setpriv", "--pdeathsig", "TERM")
"""util-linux's setpriv sets the JVM's parent-death signal, then execs it: the kernel sends
SIGTERM when the Python process dies, so a killed test run leaves no JVM listening behind."""


class PeerError(RuntimeError):
    """The peer did not start or stop. Tests fail on this, never skip."""


def port_free(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:`port` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(*, neighbours: tuple[int, ...] = ()) -> int:
    """A loopback port that is free, and so are `port + n` for each n in `neighbours`."""
    for _ in range(PORT_TRIES_MAX):
        port = random.randint(20_000, 40_000)
        if all(port_free(port + n) for n in (0, *neighbours)):
            return port
    raise PeerError("no free loopback port found")


def _write_properties(path: Path, values: dict[str, object]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))


def broker_properties(*, namesrv: str, port: int, store_dir: Path, flush: str) -> dict[str, object]:
    """The broker's settings: RocketMQ's defaults except loopback, the store, the flush and
    the delay levels (seconds, not minutes: delay_levels.py)."""
    return {
        "brokerClusterName": CLUSTER_NAME,
        "brokerName": BROKER_NAME,
        "brokerId": 0,
        "namesrvAddr": namesrv,
        "brokerIP1": "127.0.0.1",
        "bindAddress": "127.0.0.1",
        "listenPort": port,
        "storePathRootDir": store_dir,
        "storePathCommitLog": store_dir / "commitlog",
        "flushDiskType": FLUSH_DISK_TYPES[flush],
        # Tests send to topics no one created: the broker creates them from TBW102.
        "autoCreateTopicEnable": "true",
        "autoCreateSubscriptionGroup": "true",
        # Retries wait level 3 + reconsumeTimes: 3 s, 4 s, ... here instead of 10 s, 30 s, ...
        ROCKETMQ_PROPERTY: TEST_DELAY_LEVELS,
        # Transaction checks every 2 s of halves older than 4 s (30 s and 6 s by default), so
        # an UNKNOW transaction is checked and committed within seconds (transaction_checks.py).
        **TRANSACTION_CHECK_PROPERTIES,
        # SQL92 filters (MessageSelector.bySql): off by default in RocketMQ, where a consumer
        # using one fails to start (CHECK_CLIENT_CONFIG answers 1); mqstore serves them.
        "enablePropertyFilter": "true",
        # The timer wheel stays on (RocketMQ's default) although nothing here sends timer
        # messages: 5.5.0's deleteTopic fails with a NullPointerException without it.
    }


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text[-6000:]


@dataclass
class RocketMqPeer:
    """A running name server and broker; `stop()` (or leaving the `with`) ends both."""

    namesrv: str
    broker: str
    work_dir: Path
    processes: list[_Process] = field(default_factory=list)
    tls: bool = False

    @property
    def pids(self) -> list[int]:
        return [process.popen.pid for process in self.processes]

    @classmethod
    @contextlib.contextmanager
    def start(cls, *, flush: str = "async", version: str = ROCKETMQ_PEER_VERSION,
              work_dir: Path | None = None,
              broker_settings: dict[str, object] | None = None,
              namesrv: str | None = None, tls: bool = False) -> Iterator[RocketMqPeer]:
        """`broker_settings`: broker properties beside `broker_properties`' (a test's own,
        `brokerName` for a second group).  `namesrv`: a name server already running
        ("127.0.0.1:PORT", e.g. `mqstore namesrv`) the broker registers with instead: no
        RocketMQ name server starts, and the peer is up once this broker is in its routes.
        `tls`: both serve only TLS and the broker registers over it (TLS_JVM_OPTIONS)."""
        if flush not in FLUSH_DISK_TYPES:
            raise ValueError(f"flush must be one of {sorted(FLUSH_DISK_TYPES)}, got {flush!r}")
        jars = build(PEER_PROJECT, version, required_jar=f"rocketmq-broker-{version}.jar")
        own_dir = work_dir is None
        directory = Path(tempfile.mkdtemp(prefix="rocketmq-peer-")) if own_dir else work_dir
        assert directory is not None
        namesrv_port = free_port() if namesrv is None else 0
        broker_port = free_port(neighbours=(-2, 1))
        peer = cls(namesrv=namesrv or f"127.0.0.1:{namesrv_port}",
                   broker=f"127.0.0.1:{broker_port}", work_dir=directory, tls=tls)
        try:
            _write_properties(directory / "namesrv.conf",
                              {"listenPort": namesrv_port, "bindAddress": "127.0.0.1"})
            _write_properties(directory / "broker.conf", broker_properties(
                namesrv=peer.namesrv, port=broker_port, store_dir=directory / "store",
                flush=flush) | (broker_settings or {}))
            if namesrv is None:
                peer._launch(jars.java, jars.classpath, "namesrv", NAMESRV_HEAP,
                             "org.apache.rocketmq.namesrv.NamesrvStartup", namesrv_port)
            peer._launch(jars.java, jars.classpath, "broker", BROKER_HEAP,
                         "org.apache.rocketmq.broker.BrokerStartup", broker_port)
            peer._await_registration()
            yield peer
        finally:
            peer.stop()
            if own_dir:
                shutil.rmtree(directory, ignore_errors=True)

    def _launch(self, java: str, classpath: str, name: str, heap: str, main_class: str,
                port: int) -> None:
        log_path = self.work_dir / f"{name}.out"
        # user.home and rocketmq.home.dir: RocketMQ's logs, kv config and defaults go there.
        argv = [*DIE_WITH_PARENT, java, *JVM_OPTIONS, *(TLS_JVM_OPTIONS if self.tls else ()),
                heap, f"-Duser.home={self.work_dir}",
                f"-Drocketmq.home.dir={self.work_dir}", "-cp", classpath, main_class,
                "-c", str(self.work_dir / f"{name}.conf")]
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.work_dir)
        process = _Process(name=name, popen=popen, log_path=log_path)
        self.processes.append(process)
        self._await_boot(process, port)

    def _await_boot(self, process: _Process, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.popen.poll() is not None:
                raise PeerError(f"RocketMQ {process.name} exited with {process.popen.returncode}"
                                f" while starting:\n{process.log_tail()}")
            booted = "boot success" in process.log_path.read_text(errors="replace")
            if booted and not port_free(port):
                return
            time.sleep(0.2)
        raise PeerError(f"RocketMQ {process.name} did not boot in {START_TIMEOUT_S}s:\n"
                        f"{process.log_tail()}")

    def _await_registration(self) -> None:
        """Until the name server routes TBW102, the template auto-created topics come from.

        The broker prints "boot success" before its first registration reaches the name
        server; on a loaded machine a client started in that gap gets "No route info"."""
        deadline = time.monotonic() + START_TIMEOUT_S
        context = unverified_tls() if self.tls else None
        while not (has_route(self.namesrv, AUTO_CREATE_TEMPLATE_TOPIC, ssl_context=context)
                   and self.broker in broker_addresses(self.namesrv, ssl_context=context)):
            if time.monotonic() > deadline:
                raise PeerError(f"the broker did not register with the name server in "
                                f"{START_TIMEOUT_S}s:\n{self.processes[-1].log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM (RocketMQ's shutdown hooks flush and persist), SIGKILL after a bound."""
        for process in reversed(self.processes):
            if process.popen.poll() is None:
                process.popen.terminate()
        for process in reversed(self.processes):
            try:
                process.popen.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.wait()
        self.processes.clear()


def main() -> None:
    """`python -m tests.remoting_clients.rocketmq_peer`: run a peer until Ctrl-C."""
    flush = os.environ.get("MQSTORE_PEER_FLUSH", "async")
    # SIGTERM ends the peer like Ctrl-C: both JVMs get their shutdown in the `with` exit.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        with RocketMqPeer.start(flush=flush) as peer:
            print(f"namesrv {peer.namesrv}  broker {peer.broker}  pids {peer.pids}", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(1)
    except BuildError as exc:
        raise SystemExit(str(exc)) from exc


if __name__ == "__main__":
    main()
