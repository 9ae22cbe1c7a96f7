"""A pod that runs Apache RocketMQ's Go client (the program of tests/remoting_clients/go/,
built statically) against Brokers on the real node, as an application pod would: given only
a name server address, in a namespace of its own.

The binary is copied into the pod's emptyDir through `kubectl exec` stdin (the image has
python, not necessarily tar for `kubectl cp`).  The same pod runs small standard-library
scripts (`run_python`), such as a raw name-server request."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

from .kube import Kube, condition, wait_for
from .node_pods import RESTRICTED_CONTAINER, RESTRICTED_POD

CLIENT = "go-client"
WORK_DIR = "/work"
"""The client pod's only writable path (an emptyDir): the binary and its cwd, and
mqadmin's runtime and jars (e2e/node_admin.py: about 130 MiB unpacked, a JVM of 128 MiB
heap)."""


def client_pod(namespace: str, image: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": CLIENT, "namespace": namespace},
            "spec": {"securityContext": RESTRICTED_POD, "automountServiceAccountToken": False,
                     "terminationGracePeriodSeconds": 1,
                     "volumes": [{"name": "work", "emptyDir": {"sizeLimit": "384Mi"}}],
                     "containers": [{
                         "name": CLIENT, "image": image, "imagePullPolicy": "Never",
                         "command": ["sleep", "infinity"], "workingDir": WORK_DIR,
                         "env": [{"name": "HOME", "value": WORK_DIR}],
                         "securityContext": RESTRICTED_CONTAINER,
                         "volumeMounts": [{"name": "work", "mountPath": WORK_DIR}],
                         "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                       "limits": {"memory": "512Mi"}}}]}}


def exec_in_client(kube: Kube, namespace: str, *argv: str, stdin: bytes = b"",
                   timeout_s: float = 60.0) -> str:
    """`argv` run in the client pod; its stdout (a non-zero exit fails the test)."""
    done = subprocess.run([str(kube.bin_dir / "kubectl"), "exec", "-i", "-n", namespace,
                           CLIENT, "--", *argv], input=stdin, capture_output=True,
                          env=kube.env, timeout=timeout_s, check=False)
    stdout, stderr = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"{argv[0]} exited {done.returncode}:\n{stdout[-3000:]}\n" \
                                 f"{stderr[-6000:]}"
    return stdout


def copy_binary(kube: Kube, namespace: str, binary: Path) -> str:
    """The binary into the pod's emptyDir; returns its path in the pod."""
    target = f"{WORK_DIR}/{binary.name}"
    script = (f"import os, sys; open({target!r}, 'wb').write(sys.stdin.buffer.read()); "
              f"os.chmod({target!r}, 0o755)")
    exec_in_client(kube, namespace, "python", "-c", script, stdin=binary.read_bytes())
    return target


def users_keys(kube: Kube, broker: str, namespace: str) -> tuple[str, str]:
    """The admin account the operator generated into `<broker>-users`."""
    data = wait_for("the users Secret", lambda: (kube.get("secret", f"{broker}-users",
                                                          namespace) or {}).get("data"))
    return (base64.b64decode(data["accessKey"]).decode(),
            base64.b64decode(data["secretKey"]).decode())


def is_ready(kube: Kube, kind: str, name: str, namespace: str) -> bool:
    """Whether the object's Ready condition is True (a pod's, a Broker's)."""
    return (condition(kube.get(kind, name, namespace), "Ready") or {}).get("status") == "True"


def assert_each_received_once(report: dict[str, Any], *, messages: int,
                              brokers: set[str] | None = None) -> None:
    """The Go client's produce-consume report: `messages` sent, acknowledged and received
    exactly once, field by field; with `brokers`, spread over exactly those groups and
    received from each what was sent there."""
    assert report["ok"], report
    assert (report["sent"], report["expected"], report["received"]) == (
        messages, messages, messages), report
    assert (report["missingCount"], report["duplicates"], report["unexpected"],
            report["mismatchCount"]) == (0, 0, 0, 0), report
    if brokers is not None:
        assert set(report["sentByBroker"]) == brokers, report
        assert report["receivedByBroker"] == report["sentByBroker"], report
