"""Issue 17, Found 1: `mqstore up --host 127.0.0.1` listened for followers on 0.0.0.0.

Every listening socket of the three services `mqstore up` starts (HTTP, the remoting front,
the writer's forward and replication listeners) must be bound where `--host` says, read from
the kernel's socket table (/proc/net/tcp*), not from the services' own log lines."""

from __future__ import annotations

from pathlib import Path

from mqstore.services.cli.up import Supervisor, UpOptions
from tests.abuse.transport_sockets import listening_addresses
from tests.integration.three_services import free_ports


def test_up_binds_every_listener_of_every_service_to_its_host(tmp_path: Path) -> None:
    ports = free_ports(("writer", "indexer", "notifier", "remoting",
                                              "forward"))
    said: list[str] = []
    (tmp_path / "data").mkdir()
    supervisor = Supervisor(UpOptions(data_dir=tmp_path / "data", ports=ports,
                                      host="127.0.0.1"), say=said.append)
    try:
        supervisor.start()
        listeners = {name: listening_addresses(child.process.pid)
                     for name, child in supervisor._children.items()}
    finally:
        supervisor.stop()
    # writer: HTTP, forward, replication; indexer: HTTP; notifier: HTTP, remoting
    assert sorted(len(addresses) for addresses in listeners.values()) == [1, 2, 3], listeners
    assert all(address.startswith("127.0.0.1:")
               for addresses in listeners.values() for address in addresses), listeners
