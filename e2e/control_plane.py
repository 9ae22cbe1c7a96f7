"""A Kubernetes control plane on loopback, for the e2e suite and for trying the operator
without a cluster: etcd, kube-apiserver and kube-controller-manager (only the garbage
collector, the StatefulSet controller and claim protection: StatefulSets make Pods and
claims, and deleted owners take their children along).  There is no kubelet and no
scheduler: Pods stay Pending until a test patches their status.

    python e2e/control_plane.py start [--dir DIR]   # prints `export KUBECONFIG=...`
    python e2e/control_plane.py stop [--dir DIR]

`start` builds the binaries first when they are missing (e2e/build-control-plane.sh).
Everything listens on 127.0.0.1 at ports chosen free at start; the processes' ids go into
DIR/state.json, and `stop` ends exactly those.  The admin identity is a static token in
the system:masters group.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / ".cache" / "e2e" / "control-plane"
ADMIN_TOKEN = "mqstore-e2e-admin-token"
START_TIMEOUT_S = 120.0
"""etcd starts in about a second; kube-apiserver installs its CRD and RBAC bootstrap data
in 10–20 s on 2 busy cores."""
STOP_TIMEOUT_S = 15.0
SERVICE_CIDR = "10.0.0.0/24"
"""Only an allocation range for Service ClusterIPs kept in etcd: no traffic goes there."""
CONTROLLERS = ("garbage-collector-controller,statefulset-controller,"
               "persistentvolumeclaim-protection-controller")
"""Garbage collection (owners take their children along), StatefulSets (Pods and claims from
the claim template), and claim protection (it lifts the kubernetes.io/pvc-protection
finalizer once no Pod uses a deleted claim, so deleted claims go away)."""


class ControlPlaneError(RuntimeError):
    """A binary is missing, or a process did not become ready: the log's tail says why."""


@dataclasses.dataclass
class ControlPlane:
    directory: Path
    bin_dir: Path
    server: str
    kubeconfig: Path
    pids: dict[str, int]

    def save(self) -> None:
        state = {"bin_dir": str(self.bin_dir), "server": self.server,
                 "kubeconfig": str(self.kubeconfig), "pids": self.pids}
        (self.directory / "state.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> ControlPlane:
        state = json.loads((directory / "state.json").read_text())
        return cls(directory=directory, bin_dir=Path(state["bin_dir"]), server=state["server"],
                   kubeconfig=Path(state["kubeconfig"]), pids=dict(state["pids"]))

    def tool(self, name: str) -> Path:
        return self.bin_dir / name


def build_binaries() -> Path:
    """Runs the build script (a no-op when the cache is complete); returns the bin dir."""
    script = ROOT / "e2e" / "build-control-plane.sh"
    done = subprocess.run(["bash", str(script)], check=False, stdout=subprocess.PIPE,
                          text=True)
    if done.returncode != 0:
        raise ControlPlaneError(f"{script} failed with exit code {done.returncode}")
    return Path(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def write_kubeconfig(path: Path, *, server: str, token: str, ca_path: Path | None,
                     namespace: str = "default") -> None:
    """A kubeconfig for `server` with a bearer token (kopf, kubectl and helm read it)."""
    cluster: dict[str, object] = {"server": server}
    if ca_path is not None:
        cluster["certificate-authority"] = str(ca_path)
    else:
        cluster["insecure-skip-tls-verify"] = True
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "e2e",
              "clusters": [{"name": "e2e", "cluster": cluster}],
              "users": [{"name": "e2e", "user": {"token": token}}],
              "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e",
                                                       "namespace": namespace}}]}
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)


def terminate(process: subprocess.Popen[bytes], *, timeout_s: float = 30) -> int:
    """SIGTERM, wait up to `timeout_s`, then SIGKILL; the exit code."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def _spawn(name: str, argv: list[str], directory: Path) -> int:
    log = (directory / f"{name}.log").open("ab")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    return process.pid


def _log_tail(directory: Path, name: str, lines: int = 20) -> str:
    path = directory / f"{name}.log"
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours counts as gone
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return waited == 0


def _wait_http(url: str, *, name: str, pid: int, directory: Path, token: str | None = None,
               timeout_s: float = START_TIMEOUT_S) -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            raise ControlPlaneError(f"{name} exited during start:\n{_log_tail(directory, name)}")
        try:
            request = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(request, timeout=2, context=context) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    raise ControlPlaneError(f"{name} not ready at {url} after {timeout_s:.0f} s:\n"
                            f"{_log_tail(directory, name)}")


def _keys(directory: Path) -> tuple[Path, Path]:
    """The service-account signing key pair (TokenRequest issues the operator's token)."""
    private, public = directory / "sa.key", directory / "sa.pub"
    if not private.exists():
        subprocess.run(["openssl", "genrsa", "-out", str(private), "2048"], check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(private), "-pubout", "-out", str(public)],
                       check=True, capture_output=True)
    return private, public


def _apiserver_argv(bin_dir: Path, directory: Path, *, etcd_url: str, port: int) -> list[str]:
    private, public = _keys(directory)
    (directory / "tokens.csv").write_text(f"{ADMIN_TOKEN},e2e-admin,e2e-admin,system:masters\n")
    return [str(bin_dir / "kube-apiserver"), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={port}", f"--cert-dir={directory / 'certs'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount", "--authorization-mode=RBAC",
            f"--token-auth-file={directory / 'tokens.csv'}",
            f"--service-account-issuer=https://127.0.0.1:{port}",
            f"--service-account-key-file={public}",
            f"--service-account-signing-key-file={private}",
            "--endpoint-reconciler-type=none"]


def start(directory: Path) -> ControlPlane:
    """Start etcd, kube-apiserver and kube-controller-manager; wait until all are up."""
    if (directory / "state.json").exists():
        raise ControlPlaneError(f"{directory} has a running control plane (stop it first)")
    bin_dir = build_binaries()
    directory.mkdir(parents=True, exist_ok=True)
    pids: dict[str, int] = {}
    plane = ControlPlane(directory, bin_dir, "", directory / "kubeconfig", pids)
    try:
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        pids["etcd"] = _spawn("etcd", [
            str(bin_dir / "etcd"), f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync=true", "--log-level=warn"], directory)
        plane.save()
        _wait_http(f"{etcd_url}/health", name="etcd", pid=pids["etcd"], directory=directory)
        pids["kube-apiserver"] = _spawn("kube-apiserver", _apiserver_argv(
            bin_dir, directory, etcd_url=etcd_url, port=api_port), directory)
        plane.save()
        plane.server = f"https://127.0.0.1:{api_port}"
        _wait_http(f"{plane.server}/readyz", name="kube-apiserver",
                   pid=pids["kube-apiserver"], directory=directory, token=ADMIN_TOKEN)
        write_kubeconfig(plane.kubeconfig, server=plane.server, token=ADMIN_TOKEN,
                         ca_path=directory / "certs" / "apiserver.crt")
        pids["kube-controller-manager"] = _spawn("kube-controller-manager", [
            str(bin_dir / "kube-controller-manager"), f"--kubeconfig={plane.kubeconfig}",
            f"--authentication-kubeconfig={plane.kubeconfig}",
            f"--authorization-kubeconfig={plane.kubeconfig}",
            f"--controllers={CONTROLLERS}", "--leader-elect=false",
            "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
            f"--cert-dir={directory / 'kcm-certs'}"], directory)
        plane.save()
        time.sleep(1.0)
        if not _alive(pids["kube-controller-manager"]):
            raise ControlPlaneError("kube-controller-manager exited during start:\n"
                                    + _log_tail(directory, "kube-controller-manager"))
    except BaseException:
        stop(directory)
        raise
    return plane


def _is_ours(pid: int, binary: Path) -> bool:
    """The pid still runs `binary` (not a process that reused a recorded pid)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return command.decode(errors="replace") == str(binary)


def stop(directory: Path) -> list[str]:
    """End the processes `start` recorded (SIGTERM, then SIGKILL); returns their names."""
    state = directory / "state.json"
    if not state.exists():
        return []
    plane = ControlPlane.load(directory)
    plane.pids = {name: pid for name, pid in plane.pids.items()
                  if _is_ours(pid, plane.bin_dir / name)}
    for pid in reversed(list(plane.pids.values())):
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for pid in plane.pids.values():
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    state.unlink()
    return list(plane.pids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                        help=f"state, logs and data (default {DEFAULT_DIR})")
    arguments = parser.parse_args(argv)
    directory = arguments.dir.resolve()
    try:
        if arguments.command == "start":
            plane = start(directory)
            print(f"# control plane up at {plane.server}; logs in {directory}", file=sys.stderr)
            print(f"export KUBECONFIG={plane.kubeconfig}")
            print(f"export PATH={plane.bin_dir}:$PATH")
        else:
            stopped = stop(directory)
            print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running",
                  file=sys.stderr)
    except ControlPlaneError as error:
        print(f"control_plane: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
