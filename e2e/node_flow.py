"""One Broker's life on the real node, shared by the flow tests (e2e/test_node_flows.py):
its namespace, the client pod that talks to it, and every message a writer acknowledged so
far, by topic, so each disruption can be followed by reading all of them back.

`kubectl get brokers` is read as a user reads it (the printer columns), and the Broker's
pods, StatefulSet and claims as the real controllers and kubelet leave them."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from typing import Any

from .kube import Kube, condition, wait_for
from .node_client import Ack, ClientPod, Produced
from .node_state import Node

NAME = "demo"
"""The example Broker's name (charts/mqstore/examples/broker.yaml)."""
WRITER, NOTIFIER = 8081, 8083
COLUMNS = ["NAME", "READY", "REPLICAS", "READY-REPLICAS", "GROUPS", "READY-GROUPS", "STORAGE",
           "AGE"]
"""`kubectl get brokers`: the CRD's printer columns (charts/mqstore/crds/)."""
READY_TIMEOUT_S = 300.0
"""Pods of a 2-core machine shared with other test runs: a preallocating init container,
three containers and their probes per pod, two pods one after the other; about 30 s a pod
when the machine is quiet."""
ROLL_TIMEOUT_S = 420.0
"""A rolling update replaces the pods one at a time, each waiting for its predecessor to be
ready, and a pod's grace period is 30 s."""


@dataclasses.dataclass
class Flow:
    node: Node
    kube: Kube
    namespace: str
    client: ClientPod
    directory: Path
    acks: dict[str, list[Ack]] = dataclasses.field(default_factory=dict)
    """Every PUT_OK so far, by topic."""

    @property
    def service(self) -> str:
        """The Broker's client Service: what an application uses (pod 0, the master)."""
        return f"http://{NAME}"

    def pod_url(self, ordinal: int, port: int) -> str:
        """One pod through the headless Service's per-pod DNS name."""
        return f"http://{NAME}-{ordinal}.{NAME}-headless:{port}"

    def record(self, topic: str, produced: Produced) -> list[Ack]:
        assert produced.acks, f"no PUT_OK on {topic}: {produced.outcomes}"
        self.acks.setdefault(topic, []).extend(produced.acks)
        return produced.acks

    def assert_every_ack_readable(self, notifier_url: str, *, where: str) -> None:
        """Each acknowledged message of every topic, at its queue offset with its body and
        commit log position, pulled from `notifier_url`."""
        for topic, acks in self.acks.items():
            found = self.client.missing(notifier_url, topic, acks)
            assert found["missing_count"] == 0, (
                f"{found['missing_count']} of {len(acks)} acknowledged {topic} messages are "
                f"not on {where}; first: {found['missing']} ({found['last_error']})")

    def assert_nothing_lost(self) -> None:
        """On the master, through the Service, and on every follower, through its pod."""
        self.assert_every_ack_readable(f"{self.service}:{NOTIFIER}", where="the master")
        for ordinal in range(1, self.replicas()):
            self.assert_every_ack_readable(self.pod_url(ordinal, NOTIFIER),
                                           where=f"follower {NAME}-{ordinal}")

    def broker(self) -> dict[str, Any]:
        return self.kube.must_get("broker", NAME, self.namespace)

    def replicas(self) -> int:
        return int(self.broker()["spec"]["replicas"])

    def listed(self) -> list[str]:
        """The Broker's row of `kubectl get brokers`, columns `COLUMNS`."""
        header, *rows = self.kube.kubectl("get", "brokers", "-n",
                                          self.namespace).stdout.splitlines()
        assert header.split() == COLUMNS, header
        row = next((r.split() for r in rows if r.split()[0] == NAME), None)
        assert row is not None, f"no {NAME} in `kubectl get brokers`: {rows}"
        return row

    def wait_listed(self, ready: str, replicas: int, ready_replicas: int, *,
                    timeout_s: float = READY_TIMEOUT_S) -> list[str]:
        wanted = [NAME, ready, str(replicas), str(ready_replicas)]

        def shown() -> list[str] | None:
            row = self.listed()
            return row if row[:4] == wanted else None

        return wait_for(f"`kubectl get brokers` to show {' '.join(wanted)}", shown,
                        timeout_s=timeout_s)

    def users_keys(self) -> tuple[str, str]:
        """The admin account the operator generated into `<broker>-users`."""
        data = self.kube.must_get("secret", f"{NAME}-users", self.namespace)["data"]
        access_key, secret_key = (base64.b64decode(data[key]).decode()
                                  for key in ("accessKey", "secretKey"))
        return access_key, secret_key

    def pods(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.kube.items(
            "pods", self.namespace, f"app.kubernetes.io/instance={NAME}")}

    def wait_rolled(self, before: dict[str, str]) -> dict[str, str]:
        """Until the StatefulSet's rollout is complete and every pod is new (a uid not in
        `before`), ready and on the update revision; returns the pods' uids."""
        def rolled() -> dict[str, str] | None:
            sts = self.kube.must_get("statefulset", NAME, self.namespace)
            status, replicas = sts["status"], sts["spec"]["replicas"]
            pods = self.pods()
            done = (status.get("updateRevision") == status.get("currentRevision")
                    and status.get("updatedReplicas") == replicas
                    and status.get("readyReplicas") == replicas and len(pods) == replicas
                    and all(p["metadata"]["uid"] not in before.values() for p in pods.values())
                    and all(_ready(p) for p in pods.values()))
            return {n: p["metadata"]["uid"] for n, p in pods.items()} if done else None

        return wait_for("every pod replaced and ready", rolled, timeout_s=ROLL_TIMEOUT_S)

    def wait_ready(self) -> None:
        wait_for("the Broker to be Ready", lambda: (condition(self.broker(), "Ready") or {})
                 .get("status") == "True", timeout_s=READY_TIMEOUT_S)


def _ready(pod: dict[str, Any]) -> bool:
    return (condition(pod, "Ready") or {}).get("status") == "True"


def uids(pods: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in pods.items()}
