"""The mqstore image, built from the repository's Dockerfile without Docker, runs on the
real node under the "restricted" Pod Security Standard: the API server refuses a pod that
falls short of it, and admits one that runs as uid 10001 with a read-only root filesystem,
no capabilities and the runtime's default seccomp profile, where `mqstore --help` works."""

from __future__ import annotations

import json

import pytest

from .kube import CommandError, Kube
from .node_pods import (
    MQSTORE_UID,
    last_json_line,
    pod,
    python_command,
    restricted_namespace,
    run_to_completion,
)
from .node_state import Node

INSPECT = """
import json, os
report = {"uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups())}
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
report["cap_eff"] = status["CapEff"].strip()
report["seccomp"] = status["Seccomp"].strip()
report["no_new_privs"] = status["NoNewPrivs"].strip()
try:
    open("/opt/mqstore/written-by-the-test", "w")
    report["root_write"] = "allowed"
except OSError as error:
    report["root_write"] = error.strerror
print(json.dumps(report))
"""


def test_the_api_server_enforces_the_restricted_standard(node: Node, node_kube: Kube) -> None:
    namespace = restricted_namespace(node_kube)
    lax = pod("lax", namespace, node.images["mqstore"], {"main": ["mqstore", "--help"]})
    del lax["spec"]["securityContext"]
    for container in lax["spec"]["containers"]:
        del container["securityContext"]
    with pytest.raises(CommandError) as refused:
        node_kube.kubectl("create", "-f", "-", stdin=json.dumps(lax))
    assert 'violates PodSecurity "restricted:latest"' in refused.value.stderr


def test_the_mqstore_image_runs_restricted(node: Node, node_kube: Kube) -> None:
    namespace = restricted_namespace(node_kube)
    results = run_to_completion(node_kube, pod(
        "mqstore", namespace, node.images["mqstore"],
        {"help": ["mqstore", "--help"], "inspect": python_command(INSPECT)}))
    code, log = results["help"]
    assert code == 0, log
    assert "usage: mqstore" in log
    code, log = results["inspect"]
    assert code == 0, log
    report = last_json_line(log)
    assert report["uid"] == MQSTORE_UID and report["gid"] == MQSTORE_UID, report
    assert report["cap_eff"] == "0000000000000000", report
    assert report["seccomp"] == "2", report  # 2: a seccomp filter is in force
    assert report["no_new_privs"] == "1", report
    assert report["root_write"] == "Read-only file system", report
