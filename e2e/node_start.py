"""How `up` (e2e/node.py) starts the real e2e node's daemons, in order, each in the run's
cgroup and namespaces, and waits for each to answer: etcd, kube-apiserver and the
127.0.0.1 forward to it, containerd (and the image imports), kubelet, kube-proxy,
kube-scheduler, kube-controller-manager, the add-ons and local-path-provisioner."""

from __future__ import annotations

import shlex
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
from .control_plane import free_port
from .kube import wait_for
from .netns_forward import join_netns
from .node_config import (
    API_PORT,
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
from .node_pki import Pki
from .node_state import Node, NodeError, alive, log_tail

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120.0
"""Per daemon; kube-apiserver answers after 4–6 s here, 10–20 s were seen on busier cores."""
READY_TIMEOUT_S = 180.0
"""Node Ready and CoreDNS available after the daemons answer (a few seconds measured)."""
POLL_S = 0.25
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
T = TypeVar("T")


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
        if not alive(pid):
            raise NodeError(f"{name} exited during start:\n{log_tail(node, name)}")
        if probe():
            return
        time.sleep(POLL_S)
    raise NodeError(f"{name} not ready after {timeout_s:.0f} s:\n{log_tail(node, name)}")


def _http_ok(url: str, *, token: str | None = None, ca: Path | None = None) -> bool:
    context = ssl.create_default_context(cafile=str(ca)) if ca else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=2, context=context) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def kubeconfigs(node: Node, pki: Pki, secret: str) -> dict[str, Path]:
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


def start_control_plane(node: Node, pki: Pki, secret: str) -> None:
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


def start_containerd(node: Node, images: dict[str, tuple[str, Path]]
                      ) -> dict[str, subprocess.Popen[str]]:
    """Starts containerd and, once it answers, one `ctr images import` per image, which run
    while the kubelet starts (`await_imports` waits for them before any pod is made)."""
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


def await_imports(imports: dict[str, subprocess.Popen[str]]) -> None:
    for name, process in imports.items():
        _, error = process.communicate(timeout=START_TIMEOUT_S)
        if process.returncode != 0:
            raise NodeError(f"ctr images import of {name}: {error.strip()}")


def start_node_daemons(node: Node, pki: Pki, configs: dict[str, Path]) -> None:
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


def start_addons(node: Node, configs: dict[str, Path]) -> None:
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


def wait_ready(node: Node, started: float) -> None:
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
        if not alive(node.processes[name]["pid"]):
            raise NodeError(f"{name} exited:\n{log_tail(node, name)}")
    wait_for("the node to be Ready", node_ready, timeout_s=READY_TIMEOUT_S)
    node.timings_s["node_ready"] = time.monotonic() - started
    _wait(node, "kube-proxy", lambda: _in_netns(node, lambda: _http_ok(
        f"http://127.0.0.1:{KUBE_PROXY_HEALTH_PORT}/healthz")), timeout_s=READY_TIMEOUT_S)
    node_isolation.put_isolation_first(node.netns)
    wait_for("CoreDNS to be available", dns_ready, timeout_s=READY_TIMEOUT_S)
    node.timings_s["coredns_available"] = time.monotonic() - started

