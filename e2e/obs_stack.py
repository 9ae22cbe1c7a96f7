"""The services the observability tests scrape: one "pod" per broker, its services as real
processes on loopback (tests/integration/replicas.py), a produce/consume workload, and
the scrape targets with the labels a PodMonitor gives them in a cluster.

A pod may run only some of its services (a writer alone shows most storage conditions) and
its own store settings (a long flush interval, a pool of two buffers, a sync master nobody
follows), and its data directory may be a tiny tmpfs (`TinyVolume`) that really fills up.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from mqstore.client import Consumer, OutgoingMessage, Producer
from mqstore.client.errors import MqstoreError
from tests.integration.replicas import Node

from .prometheus import Target

NAMESPACE = "mqstore-obs"
"""The contract's test labels: namespace, broker and pod on every series."""
TOPIC = "Orders"
BODY_SIZE_BYTES = 1024
ALL_SERVICES = ("indexer", "writer", "notifier")


class Pod(Node):
    """The containers of one broker pod (all three or some), as processes on loopback, with
    the role and store settings of that pod (tests/integration/replicas.py)."""

    def __init__(self, root: Path, broker: str, ordinal: int = 0, *, role: str = "async_master",
                 master: str | None = None, store: dict[str, Any] | None = None,
                 services: tuple[str, ...] = ALL_SERVICES) -> None:
        self.broker = broker
        self.pod = f"{broker}-{ordinal}"
        self.services = services
        super().__init__(root, self.pod, role=role, master=master, store=store)
        self.volume: TinyVolume | None = None
        self.scrape_intervals: dict[str, str] = {}
        """A service scraped at another interval than the others (prometheus.Target)."""

    def with_replication(self, **settings: Any) -> Pod:
        """Override replication settings of the config file (e.g. a long housekeeping
        interval, so a stopped follower's connection stays open and its lag grows)."""
        config = json.loads(self.config.read_text())
        config["replication"].update(settings)
        self.config.write_text(json.dumps(config))
        return self

    def with_writer(self, **settings: Any) -> Pod:
        """Override writer settings of the config file (e.g. a tiny in-flight limit)."""
        return self._with("writer", settings)

    def with_remoting(self, **settings: Any) -> Pod:
        """Override the remoting front's settings (e.g. a short transaction check)."""
        return self._with("remoting", settings)

    def _with(self, section: str, settings: dict[str, Any]) -> Pod:
        config = json.loads(self.config.read_text())
        config.setdefault(section, {}).update(settings)
        self.config.write_text(json.dumps(config))
        return self

    def on_tmpfs(self, size_bytes: int) -> Pod:
        """The data directory on a tmpfs of its own: a volume of a known, fixed capacity
        whose usage only this pod changes (the machine's disk is shared)."""
        self.volume = TinyVolume(self.data_dir, size_bytes)
        self.volume.mount()
        return self

    def metrics_text(self, service: str) -> str:
        with urllib.request.urlopen(f"{self.url(service)}/metrics", timeout=5) as answer:
            text: str = answer.read().decode()
            return text

    def signal(self, service: str, number: int) -> None:
        process = self.processes[service]
        if process.poll() is None:
            process.send_signal(number)

    def teardown(self) -> None:
        for service in self.processes:
            self.signal(service, signal.SIGCONT)
        self.kill_all()
        if self.volume is not None:
            self.volume.unmount()

    def start_all(self) -> Pod:
        for name in self.services:
            self.start(name)
        return self

    def targets(self) -> list[Target]:
        return [Target("mqstore", f"127.0.0.1:{self.ports[name]}",
                       {"namespace": NAMESPACE, "broker": self.broker, "pod": self.pod,
                        "container": name},
                       **({"scrape_interval": self.scrape_intervals[name]}
                          if name in self.scrape_intervals else {}))
                for name in self.services]


class Workload:
    """Producer and consumer threads against one pod until stop(); errors are counted, not
    raised (the sick pods refuse writes on purpose).  With `bad_pulls`, a malformed pull
    every second: a client's mistake the notifier answers 400 (the dashboards' HTTP codes)."""

    def __init__(self, pod: Pod, *, batch_size: int = 20, pause_s: float = 0.01,
                 body_size_bytes: int = BODY_SIZE_BYTES, consume: bool = True,
                 bad_pulls: bool = False, bytes_max: int | None = None) -> None:
        self.pod = pod
        self.bytes_max = bytes_max
        """Stop producing after this many body bytes (a burst, then a steady state)."""
        self.batch_size = batch_size
        self.pause_s = pause_s
        self.body_size_bytes = body_size_bytes
        self.statuses: dict[str, int] = {}
        self.received = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        targets = [self._produce] + ([self._consume] if consume else []) + (
            [self._bad_pulls] if bad_pulls else [])
        self._threads = [threading.Thread(target=target, daemon=True) for target in targets]

    def start(self) -> Workload:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _produce(self) -> None:
        body = b"x" * self.body_size_bytes
        sent_bytes = 0
        with Producer(self.pod.url("writer"), retries_max=0, timeout_s=5) as producer:
            while not self._stop.is_set():
                if self.bytes_max is not None and sent_bytes >= self.bytes_max:
                    return
                try:
                    results = producer.send_batch(
                        [OutgoingMessage(TOPIC, body) for _ in range(self.batch_size)])
                except MqstoreError as error:
                    self.errors.append(repr(error))
                    self._stop.wait(0.1)
                    continue
                for result in results:
                    self.statuses[result.status] = self.statuses.get(result.status, 0) + 1
                sent_bytes += len(results) * len(body)
                self._stop.wait(self.pause_s)

    def _consume(self) -> None:
        with Consumer(self.pod.url("notifier"), "obs", TOPIC, retries_max=0) as consumer:
            while not self._stop.is_set():
                try:
                    self.received += len(consumer.poll(max_messages=64, wait_ms=200))
                    consumer.commit()
                except MqstoreError as error:
                    self.errors.append(repr(error))
                    self._stop.wait(0.1)

    def _bad_pulls(self) -> None:
        url = f"{self.pod.url('notifier')}/v1/topics/{TOPIC}/queues/not-a-number/messages"
        while not self._stop.wait(1.0):
            try:
                urllib.request.urlopen(url, timeout=5).close()
            except urllib.error.HTTPError as error:
                self.statuses[f"HTTP_{error.code}"] = self.statuses.get(
                    f"HTTP_{error.code}", 0) + 1


class TinyVolume:
    """A tmpfs of `size_bytes` mounted at `path`: a disk that really fills (needs root)."""

    def __init__(self, path: Path, size_bytes: int) -> None:
        self.path = path
        self.size_bytes = size_bytes
        self.mounted = False

    def mount(self) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_bytes}", "tmpfs",
                        str(self.path)], check=True, capture_output=True, text=True)
        self.mounted = True
        return self.path

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", str(self.path)], check=True, capture_output=True)
            self.mounted = False


class CpuQuota:
    """A cgroup giving its processes `quota_ms` of CPU per `period_ms`: what a Kubernetes CPU
    limit does to a container.  cgroup v2 (`cpu.max`) where the unified hierarchy is mounted
    at /sys/fs/cgroup, else v1's `cpu` controller (needs root either way)."""

    V2_ROOT = Path("/sys/fs/cgroup")
    V1_ROOT = Path("/sys/fs/cgroup/cpu")

    def __init__(self, name: str, *, quota_ms: int, period_ms: int) -> None:
        assert 0 < quota_ms <= period_ms
        self.v2 = (self.V2_ROOT / "cgroup.controllers").exists()
        self.root = self.V2_ROOT if self.v2 else self.V1_ROOT
        self.path = self.root / name
        self.quota_ms = quota_ms
        self.period_ms = period_ms

    def add(self, pid: int) -> None:
        if not self.path.exists():
            self.path.mkdir()
            if self.v2:
                (self.path / "cpu.max").write_text(
                    f"{self.quota_ms * 1000} {self.period_ms * 1000}")
            else:
                (self.path / "cpu.cfs_period_us").write_text(str(self.period_ms * 1000))
                (self.path / "cpu.cfs_quota_us").write_text(str(self.quota_ms * 1000))
        (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        """After its processes ended (a cgroup with processes cannot be removed)."""
        if self.path.exists():
            for pid in (self.path / "cgroup.procs").read_text().split():
                (self.root / "cgroup.procs").write_text(pid)
            self.path.rmdir()
