"""A running real e2e node as e2e/node.py records it in DIR/state.json (what it started,
where, and what it changed on the host), and how to tell whether a recorded process still
runs."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from . import node_isolation
from .kube import Kube


class NodeError(RuntimeError):
    """A tool is missing, a build failed, or a daemon did not come up (its log says why)."""


@dataclasses.dataclass
class Node:
    directory: Path
    netns: str
    cgroup: str
    bin_dir: Path = Path()
    node_bin_dir: Path = Path()
    server: str = ""
    kubeconfig: Path = Path()
    images: dict[str, str] = dataclasses.field(default_factory=dict)
    processes: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    host: dict[str, Any] = dataclasses.field(default_factory=dict)
    timings_s: dict[str, float] = dataclasses.field(default_factory=dict)
    """Seconds from the first certificate to each milestone of `up`."""

    @property
    def netns_path(self) -> Path:
        return node_isolation.NETNS_DIR / self.netns

    @property
    def mount_ns(self) -> Path:
        return self.directory / "ns" / "mnt"

    @property
    def socket(self) -> Path:
        return self.directory / "containerd" / "containerd.sock"

    def save(self) -> None:
        state = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        (self.directory / "state.json").write_text(json.dumps(state, indent=2, default=str))

    @classmethod
    def load(cls, directory: Path) -> Node:
        state = json.loads((directory / "state.json").read_text())
        for name in ("directory", "bin_dir", "node_bin_dir", "kubeconfig"):
            state[name] = Path(state[name])
        return cls(**state)

    def kube(self) -> Kube:
        return Kube(bin_dir=self.bin_dir, kubeconfig=self.kubeconfig)



def log_tail(node: Node, name: str, lines: int = 25) -> str:
    path = node.directory / f"{name}.log"
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def alive(pid: int) -> bool:
    """Running, not a zombie (ours, reaped here; or init's, which reaps in its own time)."""
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def is_ours(pid: int, argv0: str) -> bool:
    """The pid still runs what we started (not a process that reused a recorded pid)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return command.decode(errors="replace") == argv0

