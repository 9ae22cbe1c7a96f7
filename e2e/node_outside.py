"""Programs run on the node itself, outside every pod: in the node's network namespace (`ip
netns exec`) with the host's files and no cluster resolver, as a client outside the
cluster network is.  They reach a Broker only through its external listeners' NodePorts
(operator/external.py) on the node's address."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .node_config import NODE_IP
from .node_state import Node

OUTSIDE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def outside_argv(node: Node, *argv: str) -> list[str]:
    """`argv` as run in the node's network namespace."""
    return ["ip", "netns", "exec", node.netns, *argv]


def on_node(node: Node, *argv: str, cwd: Path, timeout_s: float,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """`argv` in the node's network namespace, outside every pod (the host's files)."""
    done = subprocess.run(outside_argv(node, *argv), capture_output=True,
                          text=True, errors="replace", cwd=cwd, timeout=timeout_s,
                          env={**OUTSIDE_ENV, "HOME": str(cwd)}, check=False)
    assert not check or done.returncode == 0, (
        f"{argv[0]} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return done


def connects(node: Node, port: int, cwd: Path, *, host: str = NODE_IP) -> bool:
    """Whether a TCP connection from the node to `<host>:<port>` is accepted."""
    script = (f"import socket; socket.create_connection(({host!r}, {port}), "
              f"timeout=2).close()")
    return on_node(node, sys.executable, "-c", script, cwd=cwd, timeout_s=10,
                   check=False).returncode == 0
