"""Volumes for real: rancher's local-path-provisioner provisions a claim on the node, a
restricted pod writes it as uid 10001 (its fsGroup applied by the kubelet), and the bytes
are on the host's disk where the PersistentVolume says.  local-path cannot grow a volume:
its StorageClass says so and the API server refuses a resize."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .kube import CommandError, Kube, wait_for
from .node_addons import STORAGE_CLASS
from .node_pods import (
    MQSTORE_UID,
    last_json_line,
    pod,
    python_command,
    restricted_namespace,
    run_to_completion,
)
from .node_state import Node

CLAIM_SIZE = "64Mi"
PAYLOAD = "written by uid 10001 on the real node"

WRITE = f"""
import json, os
path = "/data/proof.txt"
with open(path, "w") as handle:
    handle.write({PAYLOAD!r})
info, folder = os.stat(path), os.stat("/data")
print(json.dumps({{"uid": info.st_uid, "gid": info.st_gid, "dir_gid": folder.st_gid,
                  "dir_setgid": bool(folder.st_mode & 0o2000)}}))
"""


def test_a_claim_is_provisioned_and_written_as_10001(node: Node, node_kube: Kube) -> None:
    namespace = restricted_namespace(node_kube)
    node_kube.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": "data", "namespace": namespace},
                     "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                              "resources": {"requests": {"storage": CLAIM_SIZE}}}})
    results = run_to_completion(node_kube, pod(
        "writer", namespace, node.images["mqstore"], {"write": python_command(WRITE)},
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        mounts=[{"name": "data", "mountPath": "/data"}]))
    code, log = results["write"]
    assert code == 0, log
    report = last_json_line(log)
    assert report["uid"] == MQSTORE_UID and report["gid"] == MQSTORE_UID, report
    assert report["dir_gid"] == MQSTORE_UID and report["dir_setgid"], report  # fsGroup

    claim = node_kube.must_get("pvc", "data", namespace)
    assert claim["status"]["phase"] == "Bound"
    volume = node_kube.must_get("pv", claim["spec"]["volumeName"])
    assert volume["spec"]["storageClassName"] == STORAGE_CLASS
    on_disk = Path(volume["spec"]["local"]["path"]) / "proof.txt"
    assert on_disk.is_relative_to(node.directory / "volumes")
    assert on_disk.read_text() == PAYLOAD
    assert os.stat(on_disk).st_uid == MQSTORE_UID

    # No expansion: local-path has no resizer, and its StorageClass does not allow it.
    with pytest.raises(CommandError) as refused:
        node_kube.merge_patch("pvc", "data", namespace,
                              {"spec": {"resources": {"requests": {"storage": "128Mi"}}}})
    assert "only dynamically provisioned pvc can be resized" in refused.value.stderr

    # Deleting the claim has the provisioner's helper pod remove the directory.
    node_kube.kubectl("delete", "pod", "writer", "-n", namespace, "--wait=true")
    node_kube.kubectl("delete", "pvc", "data", "-n", namespace, "--wait=true")
    wait_for("the volume's directory to be removed", lambda: not on_disk.parent.exists())
