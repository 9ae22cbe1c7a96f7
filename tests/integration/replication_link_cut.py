"""Run inside a fresh network namespace (`unshare -n`): a master in this namespace, its follower
in another, joined by a veth pair; cut the link (the follower's end goes down: both ends lose
carrier and every packet between them is dropped), write on, restore it, and check that the
follower catches up byte for byte.  Prints one line, "OK ..." or the failure, and exits 0/1.

    unshare -n python -P -c '...run tests.integration.replication_link_cut...' ROOT_DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from mqstore.client import OutgoingMessage, Producer
from mqstore.storage.files.watermarks import PositionsFile
from tests.integration.replicas import Node, assert_same_log, wait_for

MASTER_ADDRESS = "10.77.0.1"
FOLLOWER_ADDRESS = "10.77.0.2"


def sh(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)


def join_namespaces() -> subprocess.Popen[bytes]:
    """A second namespace (held by a sleeping process) and a veth pair into it."""
    sh("ip", "link", "set", "lo", "up")
    holder = subprocess.Popen(["unshare", "-n", "sleep", "3600"])
    own = Path("/proc/self/ns/net").readlink()
    wait_for(lambda: Path(f"/proc/{holder.pid}/ns/net").readlink() != own, timeout_s=10,
             what="the follower's namespace")
    peer = ["nsenter", "-t", str(holder.pid), "-n"]
    sh("ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1")
    sh("ip", "link", "set", "v1", "netns", str(holder.pid))
    sh("ip", "addr", "add", f"{MASTER_ADDRESS}/24", "dev", "v0")
    sh("ip", "link", "set", "v0", "up")
    sh(*peer, "ip", "addr", "add", f"{FOLLOWER_ADDRESS}/24", "dev", "v1")
    sh(*peer, "ip", "link", "set", "v1", "up")
    sh(*peer, "ip", "link", "set", "lo", "up")
    return holder


def produce(url: str, count: int, start: int) -> None:
    with Producer(url) as producer:
        for first in range(start, start + count, 50):
            results = producer.send_batch([OutgoingMessage("Cut", f"c{i}".encode() * 100)
                                           for i in range(first, first + 50)])
            assert {result.status for result in results} == {"PUT_OK"}


def follower_end(follower: Node) -> int:
    """Read from the follower's published positions: its HTTP is unreachable while cut."""
    positions = PositionsFile(follower.data_dir / "positions", writable=False)
    try:
        found = positions.read()
    finally:
        positions.close()
    assert found is not None
    return found[1]["written_position"]


def scenario(root: Path, holder_pid: int) -> dict[str, int]:
    master = Node(root, "master", role="async_master", host=MASTER_ADDRESS)
    follower = Node(root, "follower", role="follower", master=master.replication_address,
                    host=FOLLOWER_ADDRESS, netns_pid=holder_pid)
    nodes = [master, follower]
    try:
        master.start()
        follower.start()
        produce(master.url(), 1000, 0)
        end = master.status()["written_position"]
        wait_for(lambda: follower.status()["written_position"] == end, what="first catch-up")
        sh("nsenter", "-t", str(holder_pid), "-n", "ip", "link", "set", "v1", "down")
        produce(master.url(), 2000, 1000)  # the master writes on while the link is cut
        # Past housekeeping (1 s here) the master has dropped the silent follower.
        wait_for(lambda: not master.status()["followers"], what="master drops the follower")
        stalled_end = follower_end(follower)
        assert stalled_end == end, (stalled_end, end)
        cut_end = master.status()["written_position"]
        sh("nsenter", "-t", str(holder_pid), "-n", "ip", "link", "set", "v1", "up")
        wait_for(lambda: follower.status()["written_position"] == cut_end, what="catch-up")
        wait_for(lambda: [f["lag_bytes"] for f in master.status()["followers"]] == [0],
                 what="the master sees the follower caught up")
        connections = follower.status()["connections_total"]
        assert connections >= 2, connections
        assert follower.stop() == {"writer": 0}
        assert master.stop() == {"writer": 0}
        segments = assert_same_log(master.data_dir, follower.data_dir, end_position=cut_end)
        return {"before_cut": end, "after_cut": cut_end, "connections": connections,
                "segments_compared": segments}
    finally:
        for node in nodes:
            node.kill_all()


def main() -> int:
    root = Path(sys.argv[1])
    holder = join_namespaces()
    try:
        started = time.monotonic()
        result = scenario(root, holder.pid)
        result["seconds"] = round(time.monotonic() - started, 1)
        print("OK " + json.dumps(result), flush=True)
        return 0
    finally:
        holder.kill()
        holder.wait()


if __name__ == "__main__":
    sys.exit(main())
