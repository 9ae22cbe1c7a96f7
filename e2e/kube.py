"""kubectl and helm, as the e2e tests use them: JSON in, JSON out, and waiting for the
operator (polling with a deadline; a timeout names what never happened)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

WAIT_TIMEOUT_S = 60.0
"""The longest any operator reaction may take: it resyncs every 2 s in these tests, and a
busy 2-core machine has shown 10 s stalls of the API server."""
POLL_INTERVAL_S = 0.5

T = TypeVar("T")


class CommandError(AssertionError):
    def __init__(self, argv: list[str], done: subprocess.CompletedProcess[str]) -> None:
        super().__init__(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
        self.stderr = done.stderr


class Kube:
    """kubectl and helm against one kubeconfig."""

    def __init__(self, *, bin_dir: Path, kubeconfig: Path) -> None:
        self.bin_dir = bin_dir
        self.kubeconfig = kubeconfig
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig),
                    "HELM_CACHE_HOME": str(kubeconfig.parent / "helm-cache"),
                    "HELM_CONFIG_HOME": str(kubeconfig.parent / "helm-config"),
                    "HELM_DATA_HOME": str(kubeconfig.parent / "helm-data")}

    def run(self, tool: str, *args: str, stdin: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bin_dir / tool), *args]
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                              env=self.env, timeout=120, check=False)
        if check and done.returncode != 0:
            raise CommandError(argv, done)
        return done

    def kubectl(self, *args: str, stdin: str | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", *args, stdin=stdin, check=check)

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("helm", *args, check=check)

    def apply(self, manifest: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        args = ["get", kind, name, "-o", "json"]
        if namespace:
            args += ["-n", namespace]
        done = self.kubectl(*args, check=False)
        if done.returncode != 0:
            if "NotFound" in done.stderr:
                return None
            raise CommandError(args, done)
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    def must_get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        found = self.get(kind, name, namespace)
        assert found is not None, f"{kind}/{name} does not exist"
        return found

    def items(self, kind: str, namespace: str, *selector: str) -> list[dict[str, Any]]:
        args = ["get", kind, "-n", namespace, "-o", "json"]
        if selector:
            args += ["-l", ",".join(selector)]
        items: list[dict[str, Any]] = json.loads(self.kubectl(*args).stdout)["items"]
        return items

    def merge_patch(self, kind: str, name: str, namespace: str, patch: dict[str, Any], *,
                    subresource: str | None = None, check: bool = True
                    ) -> subprocess.CompletedProcess[str]:
        args = ["patch", kind, name, "-n", namespace, "--type=merge", "-p", json.dumps(patch)]
        if subresource:
            args.append(f"--subresource={subresource}")
        return self.kubectl(*args, check=check)


def wait_for(what: str, probe: Callable[[], T | None], *,
             timeout_s: float = WAIT_TIMEOUT_S) -> T:
    """Poll `probe` until it returns something other than None or False; return that."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None and last is not False:
            return last
        time.sleep(POLL_INTERVAL_S)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} "
                         f"(last seen: {last!r})")


def condition(body: dict[str, Any] | None, condition_type: str) -> dict[str, Any] | None:
    if body is None:
        return None
    for item in (body.get("status") or {}).get("conditions") or []:
        if item.get("type") == condition_type:
            found: dict[str, Any] = item
            return found
    return None
