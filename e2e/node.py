"""A real single-node Kubernetes cluster for the e2e suite and for trying the chart without
a cluster of one's own: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
kubelet, kube-proxy, containerd (runc, bridge CNI), CoreDNS and local-path-provisioner,
all inside a network namespace and a private mount namespace this run creates
(e2e/node_isolation.py), so nothing leaves the machine.  See docs/local-cluster.md.

    python -m e2e.node up [--dir DIR]     # builds what is missing; prints `export KUBECONFIG=...`
    python -m e2e.node status [--dir DIR] # the daemons, their memory, the images
    python -m e2e.node down [--dir DIR]   # ends what `up` started and restores the machine

Run from the repository root, as root.  The host reaches the API server through a TCP
forward on 127.0.0.1 (e2e/netns_forward.py); inside the namespace it listens on the node
address.  `up` records in DIR/state.json every process it started, the cgroup tree every
daemon and container runs in, the host sysctls and the root namespace's iptables rules;
`down` ends exactly those processes, removes the namespaces, cgroups and the host paths it
made, and restores the recorded values.  e2e/node_start.py starts the daemons,
e2e/node_state.py holds what state.json records.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import node_host_state, node_isolation
from .control_plane import build_binaries
from .node_config import CNI_BIN_DIR
from .node_pki import make_pki
from .node_start import (
    ROOT,
    await_imports,
    kubeconfigs,
    start_addons,
    start_containerd,
    start_control_plane,
    start_node_daemons,
    wait_ready,
)
from .node_state import Node, NodeError, alive, is_ours

DEFAULT_DIR = ROOT / ".cache" / "e2e" / "node"
STOP_TIMEOUT_S = 15.0
CONTROL_PLANE = ("etcd", "kube-apiserver", "netns-forward")
"""Stopped last, after the pods (see `down`)."""
MARKER = ".mqstore-e2e-node"
"""Marks a directory as a node's: only such a directory is ever emptied."""
DATA = ("etcd", "containerd", "hidden", "cni", "volumes", "ns", "pki", "tokens.csv")
"""What `down` deletes (cluster data, images, volumes, keys); logs and configs stay."""


def _check_tools() -> None:
    if os.geteuid() != 0:
        raise NodeError("the node needs root (namespaces, cgroups, mounts)")
    missing = [tool for tool in ("ip", "iptables", "ip6tables", "iptables-save", "nsenter",
                                 "unshare", "mount", "openssl", "runc", "buildah")
               if shutil.which(tool) is None]
    missing += [str(CNI_BIN_DIR / p) for p in ("bridge", "host-local", "loopback")
                if not (CNI_BIN_DIR / p).exists()]
    if missing:
        raise NodeError(f"missing: {', '.join(missing)} (scripts/setup.sh installs them)")


def _script(name: str, *args: str) -> list[str]:
    done = subprocess.run(["bash", str(ROOT / "e2e" / name), *args], check=False,
                          stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise NodeError(f"e2e/{name} failed with exit code {done.returncode}")
    return done.stdout.strip().splitlines()


def build() -> tuple[Path, Path, dict[str, tuple[str, Path]]]:
    """Every binary and image (each step reuses its cache): the Kubernetes bin dir, the
    node's bin dir, and {image role: (name, docker-archive)}."""
    bin_dir = build_binaries()
    node_bin_dir = Path(_script("build-node.sh")[-1])
    images = {}
    for line in _script("build-images.sh", str(node_bin_dir)):
        role, name, archive = line.split()
        images[role] = (name, Path(archive))
    return bin_dir, node_bin_dir, images


def _record_host(node: Node) -> None:
    """What `down` puts back, saved before anything changes."""
    (node.directory / "host-iptables.rules").write_text(node_host_state.iptables_rules())
    node.host = {"sysctls": node_host_state.read_sysctls(),
                 "netns_dir": node_host_state.netns_dir_state(node_isolation.NETNS_DIR),
                 "created_dirs": []}
    node.save()


def up(directory: Path) -> Node:
    """Builds what is missing, then starts the whole node; waits until the node is Ready
    and CoreDNS answers.  On any failure it runs `down` before raising."""
    if (directory / "state.json").exists():
        raise NodeError(f"{directory} has a running node (run `down` first)")
    if directory.exists() and any(directory.iterdir()) and not (directory / MARKER).exists():
        raise NodeError(f"{directory} is not empty and not a node's directory")
    _check_tools()
    bin_dir, node_bin_dir, images = build()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).touch()
    _delete_data(directory)  # a previous run's, if it ended without `down`
    run_id = secrets.token_hex(4)
    node = Node(directory=directory, netns=f"mqstore-e2e-{run_id}",
                cgroup=f"mqstore-e2e-{run_id}", bin_dir=bin_dir, node_bin_dir=node_bin_dir)
    _record_host(node)
    try:
        node_host_state.make_cgroup(f"{node.cgroup}/daemons")
        node_isolation.create_network(node.netns)
        _, created = node_isolation.create_mount_namespace(directory / "ns",
                                                           directory / "hidden")
        node.host["created_dirs"] = created
        node.save()
        started = time.monotonic()
        pki = make_pki(directory / "pki")
        secret = secrets.token_hex(16)
        start_control_plane(node, pki, secret)
        node.timings_s["api_server_ready"] = time.monotonic() - started
        configs = kubeconfigs(node, pki, secret)
        imports = start_containerd(node, images)
        start_node_daemons(node, pki, configs)
        await_imports(imports)
        node.timings_s["images_imported"] = time.monotonic() - started
        start_addons(node, configs)
        wait_ready(node, started)
        node.save()
    except BaseException:
        down(directory)
        raise
    return node


def _stop_daemons(node: Node, names: list[str]) -> list[str]:
    """SIGTERM one at a time in the reverse of the start order, each given
    `STOP_TIMEOUT_S` before SIGKILL."""
    stopped = []
    for name, process in reversed(node.processes.items()):
        pid = process["pid"]
        if name not in names:
            continue
        if not is_ours(pid, process["argv0"]):
            continue
        os.kill(pid, signal.SIGTERM)
        started = time.monotonic()
        while alive(pid) and time.monotonic() < started + STOP_TIMEOUT_S:
            time.sleep(0.05)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
            stopped.append(f"{name} (killed after {STOP_TIMEOUT_S:.0f} s)")
        else:
            stopped.append(f"{name} ({time.monotonic() - started:.1f} s)")
    return stopped


def _delete_data(directory: Path) -> None:
    if any(m.startswith(f"{directory}/") for m in node_isolation.mount_points()):
        raise NodeError(f"mounts under {directory}: run `down` first")
    for name in DATA:
        path = directory / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _remove_created_dirs(node: Node) -> list[str]:
    """rmdir the mount points `up` made on the host, unless another node still runs: there
    they are mount points of its mount namespace, which an rmdir here would detach."""
    others = [name for name in node_host_state.run_cgroups() if name != node.cgroup]
    made = node.host.get("created_dirs", [])
    if others and made:
        return [f"left {', '.join(made)} in place: {', '.join(others)} still runs"]
    report = []
    for path in made:
        try:
            Path(path).rmdir()
        except OSError as error:
            report.append(f"WARNING: could not remove {path}: {error}")
    return report


def down(directory: Path) -> list[str]:
    """Ends what `up` started and restores the machine; returns what it did, one line each."""
    if not (directory / "state.json").exists():
        return []
    node = Node.load(directory)
    # The node's daemons, then the pods' processes, then the control plane: kube-apiserver
    # waits (up to a minute) for open watches, such as CoreDNS's, before it exits.
    node_side = [name for name in node.processes if name not in CONTROL_PLANE]
    report = [f"stopped {', '.join(_stop_daemons(node, node_side)) or 'no node daemon'}"]
    killed = node_host_state.kill_cgroup(f"{node.cgroup}/kubepods")
    report.append(f"killed {killed} processes of pods")
    report.append(f"stopped {', '.join(_stop_daemons(node, list(CONTROL_PLANE))) or 'none'}")
    killed = node_host_state.kill_cgroup(node.cgroup)
    report.append(f"killed {killed} leftover processes (containerd shims) in {node.cgroup}")
    node_host_state.remove_cgroup(node.cgroup)
    node_isolation.delete_mount_namespace(directory / "ns")
    node_isolation.delete_network(node.netns)
    if node.host:
        node_host_state.restore_netns_dir(node_isolation.NETNS_DIR, node.host["netns_dir"])
        report += _remove_created_dirs(node)
        for key, (was, now) in node_host_state.restore_sysctls(node.host["sysctls"]).items():
            report.append(f"restored {key} {was} -> {now}")
        rules = directory / "host-iptables.rules"
        if node_host_state.restore_iptables(rules.read_text()):
            report.append("restored the root namespace's iptables rules (they had changed)")
    leftovers = [m for m in node_isolation.mount_points()
                 if m.startswith(str(directory)) or any(
                     m.startswith(str(p)) for p in node_isolation.HIDDEN_HOST_PATHS)]
    if leftovers:
        report.append(f"WARNING: mounts left on the host: {leftovers}")
    else:
        _delete_data(directory)
    (directory / "state.json").unlink()
    return report


def status(directory: Path) -> str:
    node = Node.load(directory)
    lines = [f"server {node.server}  kubeconfig {node.kubeconfig}  netns {node.netns}"]
    for name, process in node.processes.items():
        pid = process["pid"]
        rss = "gone"
        if is_ours(pid, process["argv0"]):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = f"{int(line.split()[1]) // 1024} MiB"
        lines.append(f"  {name:<24} pid {pid:<8} rss {rss}")
    for part, what in (("daemons", "the daemons and containerd's shims"),
                       ("kubepods", "every pod's containers")):
        anonymous = node_host_state.cgroup_rss_bytes(f"{node.cgroup}/{part}")
        if anonymous is not None:
            lines.append(f"anonymous resident memory (cgroup total_rss) of {what}: "
                         f"{anonymous // 2**20} MiB")
    lines += [f"  image {role}: {name}" for role, name in node.images.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                        help=f"state, logs and data (default {DEFAULT_DIR})")
    arguments = parser.parse_args(argv)
    directory = arguments.dir.resolve()
    try:
        if arguments.command == "up":
            started = time.monotonic()
            node = up(directory)
            milestones = ", ".join(f"{k.replace('_', ' ')} {v:.1f} s"
                                   for k, v in node.timings_s.items())
            print(f"# up in {time.monotonic() - started:.1f} s ({milestones}); API server "
                  f"{node.server}; logs in {directory}", file=sys.stderr)
            print(f"export KUBECONFIG={node.kubeconfig}")
            print(f"export PATH={node.bin_dir}:$PATH")
        elif arguments.command == "status":
            print(status(directory))
        else:
            print("\n".join(down(directory)) or "nothing was running", file=sys.stderr)
    except (NodeError, AssertionError) as error:
        print(f"node: {error}", file=sys.stderr)
        return 1
    return 0



if __name__ == "__main__":
    sys.exit(main())
