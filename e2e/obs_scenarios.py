"""The brokers the observability test runs side by side under one Prometheus: one healthy,
the others each made sick in a way an alert of the chart's rule file is meant to catch.

| broker           | pods and what is done to them                     | alerts it must fire  |
|------------------|---------------------------------------------------|----------------------|
| obs (healthy)    | obs-0 sync master with pool + indexer + notifier, | none                 |
|                  | obs-1 its follower; produce/consume workload      |                      |
| obs-disk         | a writer on a 6 MiB tmpfs, produced into until    | DiskFillingUp,       |
|                  | the volume is full                                | WritesRefused        |
| obs-lag          | obs-lag-0: async master, flush every 10 min,      | FlushLagHigh,        |
|                  | indexer SIGSTOPped; obs-lag-1: follower,          | DispatchLagHigh,     |
|                  | SIGSTOPped; a 100 MiB burst on a 1 GiB volume     | ReplicationLagHigh,  |
|                  |                                                   | DiskFillingUp        |
| obs-pool         | a writer with a pool of one buffer: the active    | PoolExhausted        |
|                  | segment holds it, none is ever free               |                      |
| obs-nofollower   | sync master whose follower is SIGKILLed           | SyncMasterNoFollower |
| obs-slowpull     | all three services; the notifier in a cgroup with | PullLatencyHigh      |
|                  | 10 ms of CPU per second (a 10m CPU limit) while a |                      |
|                  | consumer pulls a backlog                          |                      |
| obs-busy         | a sync-flush writer admitting one put request at  | WritesRefused        |
|                  | a time, and two producers                         | (SYSTEM_BUSY)        |
| obs-dlq          | all three services; a consumer's own retry sends  | DeadLettersGrowing   |
|                  | past its max reconsume times, two a second, which |                      |
|                  | the front routes to `%DLQ%obs-dlq`                |                      |
| obs-txn          | all three services, transactions checked every    | DiscardedTransactions|
|                  | 0.5 s at most once; half messages, two a second,  | Growing              |
|                  | that no producer ends or answers: each discarded  |                      |
|                  | to `TRANS_CHECK_MAX_TIME_TOPIC` on its 2nd check  |                      |

Every pod's data directory is a tmpfs of its own, so "disk filling up" depends only on what
that pod writes (the machine's disk is shared with other work): 32 GiB for the pods that
must not fill (a limit; only what is written takes memory), small for those that must.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .control_plane import free_port
from .obs_remoting_sends import RemotingSends, abandoned_transactions, dead_letters
from .obs_stack import CpuQuota, Pod, Workload
from .prometheus import Target

GIB = 1 << 30
MIB = 1 << 20
TEN_MINUTES_MS = 600_000
HEALTHY = "obs"
EXPECTED: dict[str, set[str]] = {
    # obs-lag-0 writes ~30 MB/s to the machine's disk: at that rate it is full within 4 h.
    "MqstoreDiskFillingUp": {"obs-disk-0", "obs-lag-0"},
    "MqstoreWritesRefused": {"obs-disk-0", "obs-busy-0"},
    "MqstoreFlushLagHigh": {"obs-lag-0"},
    "MqstoreDispatchLagHigh": {"obs-lag-0"},
    "MqstoreReplicationLagHigh": {"obs-lag-0"},
    "MqstorePoolExhausted": {"obs-pool-0"},
    "MqstoreSyncMasterNoFollower": {"obs-nofollower-0"},
    "MqstorePullLatencyHigh": {"obs-slowpull-0"},
    "MqstoreDeadLettersGrowing": {"obs-dlq-0"},
    "MqstoreDiscardedTransactionsGrowing": {"obs-txn-0"},
}
"""Each broker alert and the pods whose condition causes it: it must fire for each of them
(its `pod` label says where), and never for the healthy broker."""
WEBHOOK = "mqstore-obs-unreachable"
"""The admission webhook `broken_webhook` installs (cluster-scoped: one at a time)."""
Sicken = Callable[[], None]
"""What makes a started broker sick; run once Prometheus has scraped it healthy."""
BIG_BODY_BYTES = 60 * 1024
"""The lag pod's messages: 8 per request (480 KiB) fills 64 MiB in ~140 requests."""
LAG_BURST_BYTES = 100 * MIB
"""Above the rule file's 64 MiB lag thresholds, with room for what is already flushed."""
STARVED_SCRAPE_INTERVAL = "10s"
"""The throttled notifier's scrape interval and timeout: 10 slices of its 10 ms a second
to answer /metrics; the alert's rate still has two samples well within ALERT_TIMEOUT_S."""
SLOWPULL_CPU_MS_PER_S = 10
"""The throttled notifier's CPU.  Its pull latency is the handler's own time, so a pull is
slow only when the quota runs out in the middle of it (the rest of the second is then
spent waiting); at 50 ms a second, about 40 quick pulls fit in each slice and only the one
cut off is slow: 1 to 2.5 % of pulls, around the alert's 99th percentile, which fired in
some runs and not in others.  At 10 ms a few fit, and one in a few is cut off."""
ROOMY_BYTES = 32 * GIB
"""A volume the healthy workload (≤ 0.5 MB/s, 7 GB in 4 h) is not predicted to fill."""


@dataclass
class Brokers:
    root: Path
    pods: dict[str, Pod] = field(default_factory=dict)
    workloads: list[Workload | RemotingSends] = field(default_factory=list)
    cgroups: list[CpuQuota] = field(default_factory=list)

    def add(self, pod: Pod) -> Pod:
        self.pods[pod.pod] = pod
        return pod

    def targets(self) -> list[Target]:
        return [target for pod in self.pods.values() for target in pod.targets()]

    def teardown(self) -> None:
        for workload in self.workloads:
            workload.stop()
        for pod in self.pods.values():
            pod.teardown()
        for cgroup in self.cgroups:
            cgroup.remove()


def start_healthy(brokers: Brokers) -> None:
    master = brokers.add(Pod(brokers.root, HEALTHY, 0, role="sync_master", store={
        "pool_enabled": True, "pool_buffer_count": 4, "replication_sync_timeout_ms": 2000}))
    follower = brokers.add(Pod(brokers.root, HEALTHY, 1, role="follower",
                               master=master.replication_address, services=("writer",)))
    master.on_tmpfs(ROOMY_BYTES).start_all()
    follower.on_tmpfs(ROOMY_BYTES).start_all()
    # The follower reports its lag from the first frame (heartbeat or data) it receives.
    wait_for_metric(follower, "writer", "mqstore_replication_master_lag_bytes")
    brokers.workloads.append(Workload(master, batch_size=10, pause_s=0.02,
                                      bad_pulls=True).start())


def wait_for_metric(pod: Pod, service: str, name: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while name not in pod.metrics_text(service):
        assert time.monotonic() < deadline, f"{pod.pod} {service}: no {name} in {timeout_s} s"
        time.sleep(0.2)


def start_disk(brokers: Brokers) -> Sicken:
    pod = brokers.add(Pod(brokers.root, "obs-disk", services=("writer",),
                          store={"clean_interval_ms": 500}))
    pod.on_tmpfs(6 * MIB).start_all()
    return lambda: brokers.workloads.append(Workload(pod, consume=False).start())


def start_lag(brokers: Brokers) -> Sicken:
    lagging = {"flush_interval_ms": TEN_MINUTES_MS, "flush_thorough_interval_ms": TEN_MINUTES_MS,
               "segment_size_bytes": 16 * MIB}
    master = brokers.add(Pod(brokers.root, "obs-lag", 0, store=lagging))
    # Housekeeping after 10 minutes: the stopped follower's connection stays open, so the
    # master keeps reporting its lag instead of forgetting it.
    master.with_replication(housekeeping_interval_ms=TEN_MINUTES_MS)
    follower = brokers.add(Pod(brokers.root, "obs-lag", 1, role="follower", store=lagging,
                               master=master.replication_address, services=("writer",)))
    follower.with_replication(housekeeping_interval_ms=TEN_MINUTES_MS)
    master.on_tmpfs(GIB).start_all()
    follower.on_tmpfs(GIB).start_all()

    def sicken() -> None:
        master.signal("indexer", signal.SIGSTOP)
        follower.signal("writer", signal.SIGSTOP)
        brokers.workloads.append(Workload(master, batch_size=8, body_size_bytes=BIG_BODY_BYTES,
                                          pause_s=0.0, consume=False,
                                          bytes_max=LAG_BURST_BYTES).start())
    return sicken


def start_pool(brokers: Brokers) -> Sicken:
    pod = brokers.add(Pod(brokers.root, "obs-pool", services=("writer",), store={
        "pool_enabled": True, "pool_buffer_count": 1}))
    pod.on_tmpfs(ROOMY_BYTES).start_all()
    return lambda: brokers.workloads.append(
        Workload(pod, batch_size=5, pause_s=0.2, consume=False).start())


def start_nofollower(brokers: Brokers) -> Sicken:
    master = brokers.add(Pod(brokers.root, "obs-nofollower", 0, role="sync_master",
                             services=("writer",)))
    follower = brokers.add(Pod(brokers.root, "obs-nofollower", 1, role="follower",
                               master=master.replication_address, services=("writer",)))
    master.on_tmpfs(ROOMY_BYTES).start_all()
    follower.on_tmpfs(ROOMY_BYTES).start_all()
    return lambda: follower.kill("writer")


def start_slowpull(brokers: Brokers) -> Sicken:
    pod = brokers.add(Pod(brokers.root, "obs-slowpull"))
    # Its few ms of CPU a second are shared by the pulls and /metrics: within a 1 s scrape
    # timeout it would not always answer.
    pod.scrape_intervals["notifier"] = STARVED_SCRAPE_INTERVAL
    pod.on_tmpfs(ROOMY_BYTES).start_all()
    quota = CpuQuota(f"mqstore-obs-{uuid.uuid4().hex[:8]}", quota_ms=SLOWPULL_CPU_MS_PER_S,
                     period_ms=1000)
    brokers.cgroups.append(quota)

    def sicken() -> None:
        # Produced faster than the throttled notifier serves: a backlog, so pulls find data
        # and answer without waiting (the alert's held="false" pulls).
        brokers.workloads.append(Workload(pod).start())
        quota.add(pod.processes["notifier"].pid)
    return sicken


def start_busy(brokers: Brokers) -> Sicken:
    pod = brokers.add(Pod(brokers.root, "obs-busy", services=("writer",),
                          store={"flush_mode": "sync"}))
    pod.with_writer(put_requests_in_flight_max=1)
    pod.on_tmpfs(ROOMY_BYTES).start_all()

    def sicken() -> None:
        # Two producers without pauses: while one waits for its sync, the other's request
        # finds the one admission taken and is refused (503 SYSTEM_BUSY).
        for _ in range(2):
            brokers.workloads.append(Workload(pod, batch_size=5, pause_s=0.0,
                                              consume=False).start())
    return sicken


def start_dlq(brokers: Brokers) -> Sicken:
    pod = brokers.add(Pod(brokers.root, "obs-dlq"))
    pod.on_tmpfs(ROOMY_BYTES).start_all()
    return lambda: brokers.workloads.append(dead_letters(pod).start())


def start_txn(brokers: Brokers) -> Sicken:
    pod = brokers.add(Pod(brokers.root, "obs-txn").with_remoting(
        transaction_check_interval_ms=500, transaction_timeout_ms=1, transaction_check_max=1))
    pod.on_tmpfs(ROOMY_BYTES).start_all()
    return lambda: brokers.workloads.append(abandoned_transactions(pod).start())


SICK = (start_disk, start_lag, start_pool, start_nofollower, start_slowpull, start_busy,
        start_dlq, start_txn)


def broken_webhook(namespace: str) -> dict[str, Any]:
    """An admission webhook that is down (failurePolicy Fail, nothing listens on its port):
    the API server answers 500 to every StatefulSet write in `namespace`, so every pass of
    the operator over a Broker there fails while its pods keep running."""
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": WEBHOOK},
            "webhooks": [{
                "name": "statefulsets.obs.mqstore.io", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 1,
                "clientConfig": {"url": f"https://127.0.0.1:{free_port()}/validate"},
                "namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": namespace}},
                "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                           "operations": ["CREATE", "UPDATE"],
                           "resources": ["statefulsets"]}]}]}
