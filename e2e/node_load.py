"""The load client (tests/remoting_clients/load_client.py) run on the node, outside every
pod (e2e/node_outside.py), given only the name server's NodePort."""

from __future__ import annotations

from pathlib import Path

from tests.remoting_clients.java_clients import JavaClients
from tests.remoting_clients.load_client import LoadRun

from .node_outside import OUTSIDE_ENV, outside_argv
from .node_state import Node

LOAD_RATE_PER_S = 1000
"""The issue's figure: a sync-replicating producer at 1,000 msg/s."""
LOAD_THREADS = 32
"""Sending threads: 1,000 msg/s holds while a send takes up to 32 ms."""


def start_outside(node: Node, clients: JavaClients, *, namesrv: str, topic: str,
                  keys: tuple[str, str], work_dir: Path) -> LoadRun:
    return LoadRun.start(clients, namesrv=namesrv, topic=topic, work_dir=work_dir,
                         rate_per_s=LOAD_RATE_PER_S, threads=LOAD_THREADS, keys=keys,
                         wrap=lambda argv: outside_argv(node, *argv),
                         env={**OUTSIDE_ENV, "HOME": str(work_dir)})
