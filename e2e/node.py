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
made, and restores the recorded values.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from . import node_addons, node_host_state, node_isolation
from .control_plane import build_binaries, free_port
from .kube import Kube, wait_for
from .netns_forward import join_netns
from .node_config import (
    API_PORT,
    CNI_BIN_DIR,
    ETCD_CLIENT_PORT,
    ETCD_PEER_PORT,
    KUBE_PROXY_HEALTH_PORT,
    NODE_IP,
    NODE_NAME,
    SERVICE_CIDR,
    cni_conflist,
    containerd_toml,
    kube_proxy_config,
    kubeconfig,
    kubelet_config,
    token_for,
    tokens_csv,
    write_json,
)
from .node_pki import Pki, make_pki

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / ".cache" / "e2e" / "node"
START_TIMEOUT_S = 120.0
"""Per daemon; kube-apiserver needs 10–20 s on 2 busy cores to install its bootstrap data."""
READY_TIMEOUT_S = 180.0
"""Node Ready and CoreDNS available after the daemons answer (8–13 s measured idle)."""
STOP_TIMEOUT_S = 15.0
POLL_S = 0.25
CONTROL_PLANE = ("etcd", "kube-apiserver", "netns-forward")
"""Stopped last, after the pods (see `down`)."""
MARKER = ".mqstore-e2e-node"
"""Marks a directory as a node's: only such a directory is ever emptied."""
DATA = ("etcd", "containerd", "hidden", "cni", "volumes", "ns", "pki", "tokens.csv")
"""What `down` deletes (cluster data, images, volumes, keys); logs and configs stay."""
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
T = TypeVar("T")


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


def _check_tools() -> None:
    if os.geteuid() != 0:
        raise NodeError("the node needs root (namespaces, cgroups, mounts)")
    missing = [tool for tool in ("ip", "iptables", "ip6tables", "iptables-save", "nsenter",
                                 "unshare", "mount", "openssl", "runc", "buildah")
               if shutil.which(tool) is None]
    missing += [str(CNI_BIN_DIR / p) for p in ("bridge", "host-local", "loopback")
                if not (CNI_BIN_DIR / p).exists()]
    if missing:
        raise NodeError(f"missing: {', '.join(missing)} (scripts/setup-node.sh installs them)")


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


def _in_netns(node: Node, probe: Callable[[], T]) -> T:
    """Runs `probe` on a thread that joined the node's network namespace."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            join_netns(str(node.netns_path))
            outcome["value"] = probe()
        except BaseException as error:  # handed to the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value


def _log_tail(node: Node, name: str, lines: int = 25) -> str:
    path = node.directory / f"{name}.log"
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _alive(pid: int) -> bool:
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


def _spawn(node: Node, name: str, argv: list[str], *, in_node: bool = True,
           env: dict[str, str] | None = None) -> int:
    """Starts a daemon in the run's cgroup (and, `in_node`, in its namespaces)."""
    # sh joins the cgroup and execs nsenter, which execs the daemon: one pid throughout.
    joins = " ".join(f"echo $$ > {shlex.quote(str(procs))};"
                     for procs in node_host_state.cgroup_procs_files(f"{node.cgroup}/daemons"))
    prefix = ["sh", "-c", f'{joins} exec "$@"', "sh"]
    if in_node:
        prefix += ["nsenter", f"--net={node.netns_path}", f"--mount={node.mount_ns}", "--"]
    with (node.directory / f"{name}.log").open("ab") as log:
        process = subprocess.Popen(
            prefix + argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=ROOT,
            env={"PATH": PATH, "HOME": "/root", **(env or {})})
    node.processes[name] = {"pid": process.pid, "argv0": argv[0]}
    node.save()
    return process.pid


def _wait(node: Node, name: str, probe: Callable[[], bool], *,
          timeout_s: float = START_TIMEOUT_S) -> None:
    pid = node.processes[name]["pid"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            raise NodeError(f"{name} exited during start:\n{_log_tail(node, name)}")
        if probe():
            return
        time.sleep(POLL_S)
    raise NodeError(f"{name} not ready after {timeout_s:.0f} s:\n{_log_tail(node, name)}")


def _http_ok(url: str, *, token: str | None = None, ca: Path | None = None) -> bool:
    context = ssl.create_default_context(cafile=str(ca)) if ca else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=2, context=context) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _record_host(node: Node) -> None:
    """What `down` puts back, saved before anything changes."""
    (node.directory / "host-iptables.rules").write_text(node_host_state.iptables_rules())
    node.host = {"sysctls": node_host_state.read_sysctls(),
                 "netns_dir": node_host_state.netns_dir_state(node_isolation.NETNS_DIR),
                 "created_dirs": []}
    node.save()


def _kubeconfigs(node: Node, pki: Pki, secret: str) -> dict[str, Path]:
    inside = f"https://{NODE_IP}:{API_PORT}"
    files = {}
    for name, user in (("kubelet", f"system:node:{NODE_NAME}"),
                       ("kube-proxy", "system:kube-proxy"),
                       ("kube-scheduler", "system:kube-scheduler"),
                       ("kube-controller-manager", "system:kube-controller-manager"),
                       ("local-path-provisioner", node_addons.PROVISIONER_USER)):
        files[name] = write_json(node.directory / f"{name}.kubeconfig", kubeconfig(
            server=inside, token=token_for(user, secret), ca_path=pki.ca_cert))
    return files


def _start_control_plane(node: Node, pki: Pki, secret: str) -> None:
    d, b = node.directory, node.bin_dir
    etcd = f"http://127.0.0.1:{ETCD_CLIENT_PORT}"
    _spawn(node, "etcd", [
        str(b / "etcd"), f"--data-dir={d / 'etcd'}", f"--listen-client-urls={etcd}",
        f"--advertise-client-urls={etcd}",
        f"--listen-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
        f"--initial-cluster=default=http://127.0.0.1:{ETCD_PEER_PORT}",
        "--unsafe-no-fsync=true", "--log-level=warn"])
    _wait(node, "etcd", lambda: _in_netns(node, lambda: _http_ok(f"{etcd}/health")))
    (d / "tokens.csv").write_text(tokens_csv(secret))
    (d / "tokens.csv").chmod(0o600)
    _spawn(node, "kube-apiserver", [
        str(b / "kube-apiserver"), f"--etcd-servers={etcd}", "--bind-address=0.0.0.0",
        f"--advertise-address={NODE_IP}", f"--secure-port={API_PORT}",
        f"--tls-cert-file={pki.apiserver_cert}", f"--tls-private-key-file={pki.apiserver_key}",
        f"--client-ca-file={pki.ca_cert}",
        f"--kubelet-client-certificate={pki.kubelet_client_cert}",
        f"--kubelet-client-key={pki.kubelet_client_key}",
        "--kubelet-preferred-address-types=InternalIP",
        f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction", f"--token-auth-file={d / 'tokens.csv'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.service_account_pub}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        "--allow-privileged=true"])
    port = free_port()
    _spawn(node, "netns-forward", [
        sys.executable, "-m", "e2e.netns_forward", f"--netns={node.netns_path}",
        f"--listen-port={port}", f"--target={NODE_IP}:{API_PORT}"], in_node=False)
    node.server = f"https://127.0.0.1:{port}"
    admin = token_for("admin", secret)
    _wait(node, "kube-apiserver", lambda: _http_ok(f"{node.server}/readyz", token=admin,
                                                   ca=pki.ca_cert))
    node.kubeconfig = write_json(d / "kubeconfig", kubeconfig(
        server=node.server, token=admin, ca_path=pki.ca_cert))
    node.save()


def _start_containerd(node: Node, images: dict[str, tuple[str, Path]]
                      ) -> dict[str, subprocess.Popen[str]]:
    """Starts containerd and, once it answers, one `ctr images import` per image, which run
    while the kubelet starts (`_await_imports` waits for them before any pod is made)."""
    d = node.directory
    (d / "containerd").mkdir(exist_ok=True)
    (d / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
    write_json(d / "cni" / "net.d" / "10-mqstore-e2e.conflist",
               cni_conflist(d / "cni" / "ipam"), mode=0o644)
    config = d / "containerd.toml"
    config.write_text(containerd_toml(state_dir=d / "containerd", socket=node.socket,
                                      sandbox_image=images["pause"][0],
                                      cni_conf_dir=d / "cni" / "net.d"))
    ctr = [str(node.node_bin_dir / "ctr"), f"--address={node.socket}", "--namespace=k8s.io"]
    _spawn(node, "containerd", [str(node.node_bin_dir / "containerd"), f"--config={config}"],
           env={"PATH": f"{node.node_bin_dir}:{PATH}"})
    _wait(node, "containerd", lambda: node.socket.exists() and subprocess.run(
        [*ctr, "version"], capture_output=True, check=False).returncode == 0)
    imports = {}
    for role, (name, archive) in images.items():
        imports[name] = subprocess.Popen([*ctr, "images", "import", str(archive)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         text=True)
        node.images[role] = name
    node.save()
    return imports


def _await_imports(imports: dict[str, subprocess.Popen[str]]) -> None:
    for name, process in imports.items():
        _, error = process.communicate(timeout=START_TIMEOUT_S)
        if process.returncode != 0:
            raise NodeError(f"ctr images import of {name}: {error.strip()}")


def _start_node_daemons(node: Node, pki: Pki, configs: dict[str, Path]) -> None:
    d, b = node.directory, node.bin_dir
    resolv = d / node_isolation.RESOLV_CONF_NAME
    kubelet = write_json(d / "kubelet-config.yaml", kubelet_config(
        socket=node.socket, cgroup_root=f"/{node.cgroup}", client_ca=pki.ca_cert,
        resolv_conf=resolv))
    _spawn(node, "kubelet", [
        str(b / "kubelet"), f"--config={kubelet}", f"--kubeconfig={configs['kubelet']}",
        f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}"])
    proxy = write_json(d / "kube-proxy-config.yaml", kube_proxy_config(configs["kube-proxy"]))
    _spawn(node, "kube-proxy", [str(b / "kube-proxy"), f"--config={proxy}"])
    for name, port in (("kube-scheduler", 10259), ("kube-controller-manager", 10257)):
        extra = ([f"--service-account-private-key-file={pki.service_account_key}",
                  f"--root-ca-file={pki.ca_cert}", "--use-service-account-credentials=true"]
                 if name == "kube-controller-manager" else [])
        _spawn(node, name, [
            str(b / name), f"--kubeconfig={configs[name]}",
            f"--authentication-kubeconfig={configs[name]}",
            f"--authorization-kubeconfig={configs[name]}", "--leader-elect=false",
            "--bind-address=127.0.0.1", f"--secure-port={port}", *extra])


def _start_addons(node: Node, configs: dict[str, Path]) -> None:
    kube = node.kube()
    volumes = node.directory / "volumes"
    volumes.mkdir(exist_ok=True)
    for manifest in (node_addons.coredns(node.images["coredns"])
                     + node_addons.local_path(node.images["base"], volumes)):
        kube.apply(manifest)
    _spawn(node, "local-path-provisioner", [
        str(node.node_bin_dir / "local-path-provisioner"), "start",
        f"--kubeconfig={configs['local-path-provisioner']}",
        f"--namespace={node_addons.PROVISIONER_NAMESPACE}",
        f"--configmap-name={node_addons.PROVISIONER_CONFIGMAP}",
        f"--helper-image={node.images['base']}",
        f"--service-account-name={node_addons.PROVISIONER_HELPER_ACCOUNT}",
        f"--provisioner-name={node_addons.PROVISIONER}"])


def _wait_ready(node: Node, started: float) -> None:
    kube = node.kube()

    def node_ready() -> bool:
        found = kube.get("node", NODE_NAME)
        conditions = (found or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def dns_ready() -> bool:
        found = kube.get("deployment", "coredns", "kube-system")
        return bool((found or {}).get("status", {}).get("availableReplicas"))

    for name in ("kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager",
                 "local-path-provisioner", "containerd"):
        if not _alive(node.processes[name]["pid"]):
            raise NodeError(f"{name} exited:\n{_log_tail(node, name)}")
    wait_for("the node to be Ready", node_ready, timeout_s=READY_TIMEOUT_S)
    node.timings_s["node_ready"] = time.monotonic() - started
    _wait(node, "kube-proxy", lambda: _in_netns(node, lambda: _http_ok(
        f"http://127.0.0.1:{KUBE_PROXY_HEALTH_PORT}/healthz")), timeout_s=READY_TIMEOUT_S)
    node_isolation.put_isolation_first(node.netns)
    wait_for("CoreDNS to be available", dns_ready, timeout_s=READY_TIMEOUT_S)
    node.timings_s["coredns_available"] = time.monotonic() - started


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
        _start_control_plane(node, pki, secret)
        node.timings_s["api_server_ready"] = time.monotonic() - started
        configs = _kubeconfigs(node, pki, secret)
        imports = _start_containerd(node, images)
        _start_node_daemons(node, pki, configs)
        _await_imports(imports)
        node.timings_s["images_imported"] = time.monotonic() - started
        _start_addons(node, configs)
        _wait_ready(node, started)
        node.save()
    except BaseException:
        down(directory)
        raise
    return node


def _is_ours(pid: int, argv0: str) -> bool:
    """The pid still runs what we started (not a process that reused a recorded pid)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return command.decode(errors="replace") == argv0


def _stop_daemons(node: Node, names: list[str]) -> list[str]:
    """SIGTERM one at a time in the reverse of the start order, each given
    `STOP_TIMEOUT_S` before SIGKILL."""
    stopped = []
    for name, process in reversed(node.processes.items()):
        pid = process["pid"]
        if name not in names:
            continue
        if not _is_ours(pid, process["argv0"]):
            continue
        os.kill(pid, signal.SIGTERM)
        started = time.monotonic()
        while _alive(pid) and time.monotonic() < started + STOP_TIMEOUT_S:
            time.sleep(0.05)
        if _alive(pid):
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
        if _is_ours(pid, process["argv0"]):
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
