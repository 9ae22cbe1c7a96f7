"""Where the real e2e node runs: a network namespace of its own and a private mount
namespace, so that nothing it does leaves the machine or stays behind on it.

Network: `ip netns add` makes the namespace; it holds `lo` (with the node address) and the
pod bridge, and no other interface, so no packet has a way out.  It has no default route
(a pod's packet to an outside address dies on "no route" in the node namespace), no
masquerade, no upstream DNS, and the mangle and filter FORWARD chains drop anything from
the pod bridge to any interface but the bridge itself.

Mounts: every daemon runs in one private mount namespace (kept by a bind mount of its nsfs
file under the state dir).  The host paths kubelet and containerd hard-code
(`HIDDEN_HOST_PATHS`) are bind mounts of private directories there, so the containers'
mounts, the shim sockets in /run/containerd and the pod logs never appear on the host, and
all of it vanishes with the namespace at `down`.  /etc/resolv.conf is an empty file there.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .node_config import BRIDGE, NODE_IP, POD_CIDR, POD_GATEWAY

NETNS_DIR = Path("/run/netns")
HIDDEN_HOST_PATHS = (Path("/var/lib/kubelet"), Path("/var/log/pods"),
                     Path("/var/log/containers"), Path("/run/containerd"),
                     Path("/var/lib/cni"))
"""Paths kubelet, containerd, its shims or libcni use whatever their configuration says."""
RESOLV_CONF_NAME = "resolv.conf"
"""An empty resolver configuration, bound over /etc/resolv.conf in the mount namespace: no
daemon of the node knows an upstream name server (the kubelet hands it to pods with
`dnsPolicy: Default` too)."""
ISOLATION_CHAIN = "MQSTORE-E2E-ISOLATION"
NETNS_SYSCTLS = {
    "net.ipv4.ip_forward": "1",  # between pods on the bridge (the bridge plugin sets it too)
    "net.bridge.bridge-nf-call-iptables": "1",  # Service replies between pods on one bridge
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
}
"""Set inside the node's namespace only (these are per-namespace values)."""


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def in_netns(netns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A command in the node's network namespace and the host's mount namespace."""
    return run("nsenter", f"--net={NETNS_DIR / netns}", "--", *argv, check=check)


def create_network(netns: str) -> None:
    """The namespace, its `lo` with the node address, the pod bridge with the pods'
    gateway, the namespace's sysctls and the isolation rules."""
    run("ip", "netns", "add", netns)
    run("ip", "-n", netns, "link", "set", "lo", "up")
    run("ip", "-n", netns, "addr", "add", f"{NODE_IP}/32", "dev", "lo")
    run("ip", "-n", netns, "link", "add", BRIDGE, "type", "bridge")
    prefix = POD_CIDR.split("/")[1]
    run("ip", "-n", netns, "addr", "add", f"{POD_GATEWAY}/{prefix}", "dev", BRIDGE)
    run("ip", "-n", netns, "link", "set", BRIDGE, "up")
    for key, value in NETNS_SYSCTLS.items():
        in_netns(netns, "sysctl", "-q", "-w", f"{key}={value}")
    for table in ("mangle", "filter"):
        # A chain of our own, first in FORWARD; kube-proxy and kubelet add theirs after it.
        in_netns(netns, "iptables", "-t", table, "-N", ISOLATION_CHAIN)
        in_netns(netns, "iptables", "-t", table, "-A", ISOLATION_CHAIN, "-i", BRIDGE,
                 "!", "-o", BRIDGE, "-j", "DROP")
        in_netns(netns, "iptables", "-t", table, "-I", "FORWARD", "1", "-j", ISOLATION_CHAIN)
    for table in ("mangle", "filter"):
        in_netns(netns, "ip6tables", "-t", table, "-P", "FORWARD", "DROP")
    if routes_out(netns):
        raise RuntimeError(f"network namespace {netns} has a route out: {routes_out(netns)}")


def put_isolation_first(netns: str) -> None:
    """kube-proxy prepends its own FORWARD rules (KUBE-FORWARD accepts established and
    masquerade-marked packets) on its first sync: move our jump back to the top once it has
    synced.  It re-adds a rule only when one is missing, so the order then holds.  (The
    mangle table's copy is first from the start: nothing else writes mangle FORWARD.)"""
    for table in ("mangle", "filter"):
        in_netns(netns, "iptables", "-t", table, "-D", "FORWARD", "-j", ISOLATION_CHAIN)
        in_netns(netns, "iptables", "-t", table, "-I", "FORWARD", "1", "-j", ISOLATION_CHAIN)


def routes_out(netns: str) -> list[str]:
    """Routes of the namespace that lead anywhere but its own addresses and the bridge."""
    lines = run("ip", "-n", netns, "-4", "route", "show", "table", "all").stdout.splitlines()
    return [line for line in lines
            if not line.startswith(("local ", "broadcast ", f"{POD_CIDR} "))]


def links(netns: str) -> list[tuple[str, str | None]]:
    """(name, master) of every interface in the namespace."""
    found = []
    for line in run("ip", "-n", netns, "-o", "link", "show").stdout.splitlines():
        fields = line.split()
        name = fields[1].rstrip(":").split("@")[0]
        master = fields[fields.index("master") + 1] if "master" in fields else None
        found.append((name, master))
    return found


def delete_network(netns: str) -> None:
    if (NETNS_DIR / netns).exists():
        run("ip", "netns", "delete", netns)


def create_mount_namespace(ns_dir: Path, private_root: Path) -> tuple[Path, list[str]]:
    """A private mount namespace bound to `ns_dir/mnt`, with `HIDDEN_HOST_PATHS` bound to
    directories under `private_root`.  Returns the nsfs file and the host paths this made
    (empty directories to remove at `down`)."""
    ns_dir.mkdir(parents=True, exist_ok=True)
    # The file that keeps the namespace must sit on a private mount.
    run("mount", "--bind", str(ns_dir), str(ns_dir))
    run("mount", "--make-private", str(ns_dir))
    ns_file = ns_dir / "mnt"
    ns_file.touch()
    run("unshare", f"--mount={ns_file}", "--propagation", "private", "true")
    created = []
    for path in HIDDEN_HOST_PATHS:
        if not path.exists():
            path.mkdir(parents=True)
            created.append(str(path))
        private = private_root / str(path).strip("/").replace("/", "-")
        private.mkdir(parents=True, exist_ok=True)
        run("nsenter", f"--mount={ns_file}", "--", "mount", "--bind", str(private), str(path))
    resolv = private_root.parent / RESOLV_CONF_NAME
    resolv.write_text("# no upstream name server: nothing resolves outside the cluster\n")
    run("nsenter", f"--mount={ns_file}", "--", "mount", "--bind", str(resolv), "/etc/resolv.conf")
    return ns_file, created


def delete_mount_namespace(ns_dir: Path) -> None:
    """Releases the namespace (its mounts go with it once no process is left in it)."""
    for target in (ns_dir / "mnt", ns_dir):
        if is_mount_point(target):
            run("umount", str(target))


def is_mount_point(path: Path) -> bool:
    return str(path) in mount_points()


def mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as table:
        return [line.split()[4] for line in table]
