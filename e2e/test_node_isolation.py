"""Nothing leaves the machine: a pod's attempts to reach outside addresses and names fail
inside the node's network namespace, and the namespace has no way out to fail through.

Evidence without capturing packets: the pod's connects fail at once with "unreachable"
(the node answered, nothing timed out somewhere else); the namespace's own IP counters
count those packets as dropped for lack of a route; it has no route but its own addresses
and the pod bridge, no interface but `lo`, the bridge and the pods' veths on the bridge;
its FORWARD chains drop bridge-to-elsewhere first; and CoreDNS, which has no `forward`
plugin, answers an outside name itself without an address.
"""

from __future__ import annotations

import errno
import subprocess

from .kube import Kube
from .node_config import BRIDGE
from .node_isolation import ISOLATION_CHAIN, in_netns, links, routes_out
from .node_pods import last_json_line, pod, python_command, restricted_namespace, run_to_completion
from .node_state import Node

OUTSIDE = (("1.1.1.1", 53), ("8.8.8.8", 443))
OUTSIDE_NAME = "example.com"
LOCAL_FAILURE_S = 5.0
"""A connect refused by the node itself returns in milliseconds; a packet that went out
would wait for the 10 s connect timeout."""

PROBE = f"""
import json, random, socket, struct, time
report = {{"connects": {{}}}}
for host, port in {OUTSIDE!r}:
    s = socket.socket()
    s.settimeout(10)
    started = time.monotonic()
    try:
        s.connect((host, port))
        report["connects"][host] = {{"connected": True}}
    except OSError as error:
        report["connects"][host] = {{"errno": error.errno, "error": str(error),
                                     "seconds": time.monotonic() - started}}
    finally:
        s.close()
try:
    report["getaddrinfo"] = str(socket.getaddrinfo({OUTSIDE_NAME!r}, 443))
except socket.gaierror as error:
    report["getaddrinfo_error"] = [error.errno, str(error)]
# One raw query to the pod's nameserver: who answers, and with what.
server = [line.split()[1] for line in open("/etc/resolv.conf") if line.startswith("nameserver")][0]
query_id = random.randrange(65536)
name = b"".join(bytes([len(p)]) + p.encode() for p in {OUTSIDE_NAME!r}.split(".")) + b"\\0"
packet = struct.pack(">HHHHHH", query_id, 0x0100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.settimeout(5)
udp.sendto(packet, (server, 53))
answer, sender = udp.recvfrom(4096)
flags, answers = struct.unpack(">HH", answer[2:4] + answer[6:8])
report["dns"] = {{"server": server, "from": sender[0], "rcode": flags & 0xF,
                  "answers": answers, "id_matches": answer[:2] == packet[:2]}}
print(json.dumps(report))
"""


def _no_route_drops(netns: str) -> int:
    """The namespace's IpExt InNoRoutes counter: received packets dropped for lack of a
    route (/proc/net is the reading process's namespace's)."""
    lines = [line.split() for line in in_netns(netns, "cat", "/proc/net/netstat").stdout
             .splitlines() if line.startswith("IpExt:")]
    header, values = lines[0], lines[1]
    return int(values[header.index("InNoRoutes")])


def test_the_namespace_has_no_way_out(node: Node) -> None:
    assert routes_out(node.netns) == []
    unreachable = in_netns(node.netns, "ip", "route", "get", "1.1.1.1", check=False)
    assert unreachable.returncode != 0 and "unreachable" in unreachable.stderr
    for name, master in links(node.netns):
        assert name in ("lo", BRIDGE) or (name.startswith("veth") and master == BRIDGE), (
            f"interface {name} (master {master}) in the node namespace")
    for table in ("mangle", "filter"):
        forward = [rule for rule in in_netns(node.netns, "iptables", "-t", table, "-S",
                                             "FORWARD").stdout.splitlines()
                   if rule.startswith("-A FORWARD")]
        assert forward[0] == f"-A FORWARD -j {ISOLATION_CHAIN}", forward
        chain = in_netns(node.netns, "iptables", "-t", table, "-S", ISOLATION_CHAIN).stdout
        assert f"-A {ISOLATION_CHAIN} -i {BRIDGE} ! -o {BRIDGE} -j DROP" in chain


def test_a_pod_cannot_reach_outside_addresses_or_names(node: Node, node_kube: Kube) -> None:
    namespace = restricted_namespace(node_kube)
    drops_before = _no_route_drops(node.netns)
    results = run_to_completion(node_kube, pod(
        "reach-out", namespace, node.images["mqstore"], {"probe": python_command(PROBE)}))
    code, log = results["probe"]
    assert code == 0, log
    report = last_json_line(log)
    for host, _ in OUTSIDE:
        outcome = report["connects"][host]
        assert outcome.get("errno") in (errno.ENETUNREACH, errno.EHOSTUNREACH), outcome
        assert outcome["seconds"] < LOCAL_FAILURE_S, outcome
    assert "getaddrinfo_error" in report, report
    dns = report["dns"]
    assert dns["id_matches"] and dns["from"] == dns["server"], dns
    assert dns["answers"] == 0 and dns["rcode"] in (2, 3, 5), dns  # SERVFAIL/NXDOMAIN/REFUSED
    # Each SYN to an outside address was dropped in the node namespace for lack of a route.
    drops = _no_route_drops(node.netns) - drops_before
    assert drops >= len(OUTSIDE), (drops, report)
    plugins = subprocess.run([str(node.node_bin_dir / "coredns"), "-plugins"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert "kubernetes" in plugins and "forward" not in plugins, plugins
