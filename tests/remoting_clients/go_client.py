"""Build and run the Go client program (`go/main.go`, Apache RocketMQ's rocketmq-client-go/v2).

The module's dependencies come from the Go module proxy, pinned by `go/go.sum`; the binary
is built on first use into `<repo>/.cache/remoting_clients/go-<hash>/`, where the hash covers
go.mod, go.sum, the sources and `go version`.  A missing `go` or a failed build raises
BuildError: the test fails, never skips.

Typical use::

    result = GoClient.build().run(namesrv="127.0.0.1:9876", topic="t1", count=50)
    assert result["ok"], result
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.remoting_clients.java_clients import ScenarioError, json_lines, option_args
from tests.remoting_clients.maven_build import (
    BUILD_TIMEOUT_S,
    CACHE_ROOT,
    REPO_ROOT,
    require_tool,
    run_checked,
)

GO_PROJECT = REPO_ROOT / "tests" / "remoting_clients" / "go"
BINARY_NAME = "remoting-clients-go"
RUN_TIMEOUT_S = 300


def _hash(go: str) -> str:
    digest = hashlib.sha256()
    for path in sorted([GO_PROJECT / "go.mod", GO_PROJECT / "go.sum",
                        *GO_PROJECT.glob("*.go")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(run_checked([go, "version"], timeout_s=60, what="go version").stdout.encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class GoClient:
    binary: Path

    @classmethod
    def build(cls, *, static: bool = False) -> GoClient:
        """`static`: built with CGO_ENABLED=0 (Go's own resolver, no libc), so the binary
        runs in any container image it is copied into (e2e/test_node_remoting_clients.py)."""
        go = require_tool("go")
        build_dir = CACHE_ROOT / f"go-{_hash(go)}{'-static' if static else ''}"
        binary = build_dir / BINARY_NAME
        build_dir.mkdir(parents=True, exist_ok=True)
        with open(build_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not binary.exists():
                # -mod=readonly: go.sum pins every module; a build never edits go.mod.
                run_checked([go, "build", "-mod=readonly", "-o", str(binary), "."],
                            timeout_s=BUILD_TIMEOUT_S, what="go build (rocketmq-client-go)",
                            cwd=GO_PROJECT,
                            env={**os.environ, "CGO_ENABLED": "0"} if static else None)
        return cls(binary=binary)

    def run(self, *, namesrv: str, topic: str, **options: object) -> dict[str, Any]:
        # Go's flag package takes --name as well as -name: the Java scenarios' spelling works.
        argv = [str(self.binary),
                *option_args({"namesrv": namesrv, "topic": topic, **options})]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, encoding="utf-8",
                                  errors="replace", timeout=RUN_TIMEOUT_S, check=False,
                                  cwd=Path(self.binary).parent)
        except subprocess.TimeoutExpired as exc:
            raise ScenarioError(f"the Go client timed out after {RUN_TIMEOUT_S}s") from exc
        results = list(json_lines(proc.stdout))
        if proc.returncode != 0 or len(results) != 1:
            raise ScenarioError(f"the Go client exited {proc.returncode} with {len(results)} "
                                f"result lines\n--- stdout ---\n{proc.stdout[-4000:]}\n"
                                f"--- stderr ---\n{proc.stderr[-8000:]}")
        return results[0]
