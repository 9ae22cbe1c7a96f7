"""What the real e2e node changes on the host outside its namespaces, recorded at `up`
and put back at `down`: host-wide sysctls (kubelet sets the panic and overcommit ones), the
root namespace's iptables rules (nothing of ours should write them: a difference is
restored and reported), the /run/netns directory `ip netns add` may create, and the cgroup
tree every daemon and container runs in (so `down` can end exactly those processes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

HOST_SYSCTLS = ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory",
                "net.ipv4.ip_forward")
"""kubelet sets the first three (host-wide values); the last and `route_localnet` are
per network namespace and only change inside the node's, but are checked all the same."""
CGROUP_ROOT = Path("/sys/fs/cgroup")
KILL_TIMEOUT_S = 20.0


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def read_sysctls() -> dict[str, str]:
    """The host-wide sysctls and every interface's route_localnet in the root namespace."""
    keys = list(HOST_SYSCTLS)
    keys += sorted(f"net.ipv4.conf.{p.parent.name}.route_localnet"
                   for p in Path("/proc/sys/net/ipv4/conf").glob("*/route_localnet"))
    return {key: _sysctl_path(key).read_text().strip() for key in keys}


def restore_sysctls(recorded: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Writes back every recorded value that changed; returns {key: (was, now)}."""
    changed = {}
    for key, value in recorded.items():
        path = _sysctl_path(key)
        if not path.exists():  # an interface that went away
            continue
        current = path.read_text().strip()
        if current != value:
            path.write_text(value)
            changed[key] = (current, value)
    return changed


def iptables_rules() -> str:
    """The root namespace's IPv4 and IPv6 rules, without counters and comments' dates."""
    parts = []
    for tool in ("iptables-save", "ip6tables-save"):
        text = subprocess.run([tool], capture_output=True, text=True, check=True).stdout
        parts.append("\n".join(line for line in text.splitlines()
                               if not line.startswith("#")))
    return "\n=====\n".join(parts)


def restore_iptables(recorded: str) -> bool:
    """Puts back the recorded root-namespace rules if they differ; True when it had to."""
    if iptables_rules() == recorded:
        return False
    v4, v6 = recorded.split("\n=====\n")
    for tool, rules in (("iptables-restore", v4), ("ip6tables-restore", v6)):
        subprocess.run([tool], input=rules + "\n", text=True, check=True)
    return True


def netns_dir_state(netns_dir: Path) -> dict[str, bool]:
    mounted = any(line.split()[4] == str(netns_dir)
                  for line in Path("/proc/self/mountinfo").read_text().splitlines())
    return {"existed": netns_dir.exists(), "mounted": mounted}


def restore_netns_dir(netns_dir: Path, recorded: dict[str, bool]) -> None:
    """Undo what `ip netns add` did to an absent /run/netns (a self bind mount and the
    directory), once no namespace is left in it."""
    if recorded["existed"] or not netns_dir.exists() or any(netns_dir.iterdir()):
        return
    while netns_dir_state(netns_dir)["mounted"]:
        subprocess.run(["umount", str(netns_dir)], check=True)
    netns_dir.rmdir()


def hierarchies() -> list[Path]:
    """Every cgroup hierarchy mounted under /sys/fs/cgroup (v1 controllers, the named
    systemd one, and the unified one of a hybrid setup)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype in ("cgroup", "cgroup2") and fields[4].startswith(str(CGROUP_ROOT)):
            found.append(Path(fields[4]))
    return found


def make_cgroup(relative: str) -> None:
    """`relative` (e.g. `mqstore-e2e-x/daemons`) in every hierarchy; cpuset children get
    their parent's CPUs and memory nodes (v1 leaves them empty, and empty refuses tasks)."""
    for hierarchy in hierarchies():
        path = hierarchy
        for part in Path(relative).parts:
            parent, path = path, path / part
            if not path.exists():
                path.mkdir()
                if (path / "cpuset.cpus").exists():
                    for name in ("cpuset.cpus", "cpuset.mems"):
                        (path / name).write_text((parent / name).read_text())


def run_cgroups(prefix: str = "mqstore-e2e-") -> list[str]:
    """The top-level cgroups of nodes that exist now (in the pids hierarchy)."""
    pids = CGROUP_ROOT / "pids"
    return sorted(p.name for p in pids.glob(f"{prefix}*")) if pids.is_dir() else []


def cgroup_procs_files(relative: str) -> list[Path]:
    """The files a process writes its pid to, to join `relative` in every hierarchy (a
    daemon and everything it starts then stay there)."""
    return [hierarchy / relative / "cgroup.procs" for hierarchy in hierarchies()]


def cgroup_pids(relative: str) -> set[int]:
    pids: set[int] = set()
    for hierarchy in hierarchies():
        top = hierarchy / relative
        if top.is_dir():
            for procs in top.rglob("cgroup.procs"):
                pids.update(int(p) for p in procs.read_text().split())
    return pids


def kill_cgroup(relative: str, *, timeout_s: float = KILL_TIMEOUT_S) -> int:
    """SIGKILL every process in the tree until none is left; returns how many it killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while pids := cgroup_pids(relative):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes left in cgroup {relative}: {sorted(pids)}")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    return len(killed)


def remove_cgroup(relative: str) -> None:
    """rmdir the tree, deepest first, in every hierarchy."""
    for hierarchy in hierarchies():
        top = hierarchy / relative
        if not top.is_dir():
            continue
        for path in sorted((p for p in top.rglob("*") if p.is_dir()),
                           key=lambda p: len(p.parts), reverse=True):
            path.rmdir()
        top.rmdir()


def cgroup_rss_bytes(relative: str) -> int | None:
    """Resident anonymous memory of the tree (cgroup v1 memory.stat total_rss: page cache
    left out), or None without a memory controller there."""
    stat = CGROUP_ROOT / "memory" / relative / "memory.stat"
    if not stat.exists():
        return None
    values = dict(line.split() for line in stat.read_text().splitlines())
    return int(values["total_rss"])
