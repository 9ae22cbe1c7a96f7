"""Pods on the real e2e node, as the node tests run them: manifests that meet the
"restricted" Pod Security Standard, and running a pod to completion for its containers'
exit codes and logs."""

from __future__ import annotations

import json
import uuid
from typing import Any

from .kube import Kube, wait_for

POD_TIMEOUT_S = 120.0
"""A pod of the imported image runs in seconds; the bound covers a loaded 2-core machine."""
MQSTORE_UID = 10001

RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": MQSTORE_UID, "runAsGroup": MQSTORE_UID,
                  "fsGroup": MQSTORE_UID, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}


def restricted_namespace(kube: Kube) -> str:
    """A fresh namespace whose pods the API server holds to the restricted standard."""
    name = f"node-{uuid.uuid4().hex[:8]}"
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "labels": {"pod-security.kubernetes.io/enforce": "restricted",
                                 "pod-security.kubernetes.io/enforce-version": "latest"}}})
    return name


def pod(name: str, namespace: str, image: str, commands: dict[str, list[str]], *,
        volumes: list[dict[str, Any]] | None = None,
        mounts: list[dict[str, Any]] | None = None,
        env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One container per entry of `commands`, each run once to completion."""
    containers = [{"name": container, "image": image, "imagePullPolicy": "Never",
                   "command": command, "securityContext": RESTRICTED_CONTAINER,
                   "volumeMounts": mounts or [], "env": env or [],
                   "resources": {"limits": {"memory": "256Mi"}}}
                  for container, command in commands.items()]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"restartPolicy": "Never", "securityContext": RESTRICTED_POD,
                     "automountServiceAccountToken": False, "containers": containers,
                     "volumes": volumes or [], "terminationGracePeriodSeconds": 5}}


def keys_env(users_secret: str) -> list[dict[str, Any]]:
    """MQSTORE_ACCESS_KEY and MQSTORE_SECRET_KEY from a Broker's generated users Secret
    (its admin's `accessKey` and `secretKey`), as an application pod would take them."""
    return [{"name": name, "valueFrom": {"secretKeyRef": {"name": users_secret, "key": key}}}
            for name, key in (("MQSTORE_ACCESS_KEY", "accessKey"),
                              ("MQSTORE_SECRET_KEY", "secretKey"))]


def python_command(script: str) -> list[str]:
    """The image's own interpreter (the venv's, first on its PATH)."""
    return ["python", "-c", script]


def run_to_completion(kube: Kube, manifest: dict[str, Any], *,
                      timeout_s: float = POD_TIMEOUT_S) -> dict[str, tuple[int, str]]:
    """Creates the pod, waits until every container has terminated, and returns
    {container: (exit code, log)}."""
    name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    kube.kubectl("create", "-f", "-", stdin=json.dumps(manifest))

    def finished() -> dict[str, Any] | None:
        found = kube.must_get("pod", name, namespace)
        if found["status"].get("phase") in ("Succeeded", "Failed"):
            return found
        return None

    done = wait_for(f"pod {namespace}/{name} to finish", finished, timeout_s=timeout_s)
    results = {}
    for status in done["status"]["containerStatuses"]:
        code = status["state"]["terminated"]["exitCode"]
        log = kube.kubectl("logs", name, "-n", namespace, "-c", status["name"]).stdout
        results[status["name"]] = (code, log)
    return results


def last_json_line(log: str) -> dict[str, Any]:
    """The report a test script printed as its last line."""
    report: dict[str, Any] = json.loads(log.strip().splitlines()[-1])
    return report
