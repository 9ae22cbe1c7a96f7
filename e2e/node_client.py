"""A client pod on the real node, and what the Broker flows ask of it: produce through the
Broker's Service and keep every acknowledgement, consume as a group, and check that every
acknowledged message can be read back from a given notifier (the master's, through the
Service, or a follower's, through its pod's DNS name).

The pod runs the mqstore image under the restricted standard and does nothing by itself;
each step is e2e/node_in_pod_client.py run in it by `kubectl exec`, signed as the account
`sign_as` names (the Broker's generated users Secret) or unsigned before that."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

from .kube import Kube, wait_for
from .node_pods import RESTRICTED_CONTAINER, RESTRICTED_POD

SCRIPT = (Path(__file__).parent / "node_in_pod_client.py").read_text()
NAME = "client"
STOP_TIMEOUT_S = 60.0
"""A producer stops after its send in flight: at most the client's 10 s timeout."""


@dataclasses.dataclass(frozen=True)
class Ack:
    """One PUT_OK: where the writer said it stored which body."""

    queue_id: int
    queue_offset: int
    physical_offset: int
    msg_id: str
    body: str


@dataclasses.dataclass(frozen=True)
class Produced:
    acks: list[Ack]
    outcomes: dict[str, int]
    """Every answer and error by name (PUT_OK, SLAVE_NOT_AVAILABLE, UnavailableError...)."""


def _produced(lines: list[dict[str, Any]], log: str) -> Produced:
    assert lines and "outcomes" in lines[-1], f"the producer did not finish:\n{log}"
    return Produced([Ack(**line) for line in lines[:-1]], lines[-1]["outcomes"])


class Producing:
    """A producer running in the client pod until `stop`."""

    def __init__(self, argv: list[str], env: dict[str, str], output: Path) -> None:
        self.output = output
        with output.open("w") as sink:
            self.process = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE,
                                            stdout=sink, stderr=subprocess.STDOUT, text=True)

    def acks_so_far(self) -> int:
        return self.output.read_text().count('"msg_id"')

    def stop(self) -> Produced:
        """Closes the producer's stdin, which ends it after its send in flight."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=STOP_TIMEOUT_S)
        text = self.output.read_text()
        assert code == 0, f"the producer exited {code}:\n{text[-3000:]}"
        return _produced(_json_lines(text), text[-3000:])


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


class ClientPod:
    def __init__(self, kube: Kube, namespace: str, image: str) -> None:
        self.kube, self.namespace = kube, namespace
        kube.apply({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": NAME, "namespace": namespace},
                    "spec": {"securityContext": RESTRICTED_POD,
                             "automountServiceAccountToken": False,
                             "terminationGracePeriodSeconds": 1,
                             "containers": [{
                                 "name": NAME, "image": image, "imagePullPolicy": "Never",
                                 "command": ["sleep", "infinity"],
                                 "securityContext": RESTRICTED_CONTAINER,
                                 "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                               "limits": {"memory": "256Mi"}}}]}})
        wait_for("the client pod to be ready", lambda: any(
            c["type"] == "Ready" and c["status"] == "True" for c in (kube.must_get(
                "pod", NAME, namespace).get("status") or {}).get("conditions", [])),
            timeout_s=120)
        self._keys: tuple[str, str] | None = None

    def sign_as(self, access_key: str, secret_key: str) -> None:
        """Every later step signs its requests as this account."""
        self._keys = (access_key, secret_key)

    def _argv(self, *args: str) -> list[str]:
        keys = [] if self._keys is None else [
            "env", f"MQSTORE_ACCESS_KEY={self._keys[0]}", f"MQSTORE_SECRET_KEY={self._keys[1]}"]
        return [str(self.kube.bin_dir / "kubectl"), "exec", "-i", "-n", self.namespace, NAME,
                "--", *keys, "python", "-c", SCRIPT, *args]

    def _run(self, *args: str, stdin: str = "") -> list[dict[str, Any]]:
        done = subprocess.run(self._argv(*args), input=stdin, capture_output=True, text=True,
                              env=self.kube.env, timeout=300, check=False)
        assert done.returncode == 0, f"{args[0]} in the client pod exited " \
                                     f"{done.returncode}:\n{done.stderr[-3000:]}"
        return _json_lines(done.stdout)

    def produce(self, url: str, topic: str, count: int) -> Produced:
        return _produced(self._run("produce", url, topic, str(count), "0"), "")

    def start_producing(self, url: str, topic: str, output: Path, *,
                        pace_ms: int = 10) -> Producing:
        return Producing(self._argv("produce", url, topic, "0", str(pace_ms)), self.kube.env,
                         output)

    def consume(self, url: str, group: str, topic: str, count: int) -> dict[str, Any]:
        return self._run("consume", url, group, topic, str(count))[-1]

    def get(self, url: str) -> dict[str, Any]:
        return self._run("get", url)[-1]

    def missing(self, url: str, topic: str, acks: list[Ack], *,
                wait_s: float = 90.0) -> dict[str, Any]:
        """What `check` found: `missing_count` and the first few missing acknowledgements."""
        stdin = json.dumps([dataclasses.asdict(ack) for ack in acks])
        return self._run("check", url, topic, str(wait_s), stdin=stdin)[-1]
