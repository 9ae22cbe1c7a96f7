"""lossyfs for the tests: build it, mount a backing directory, cut the power, clean up.

`LossyMount.start()` mounts `backing` at `mount_point` and returns once the daemon answers;
`cut_power()` sends SIGUSR1 and waits until the daemon has dropped everything volatile,
aborted the connection and unmounted (see tests/powerloss/lossyfs/README.md).  `close()` is
the finalizer: whatever state things are in, no daemon and no mount are left behind.
"""

from __future__ import annotations

import select
import shutil
import signal
import subprocess
from pathlib import Path

REPO = Path(__file__).parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-lossyfs.sh"

BUILD_TIMEOUT_S = 600
"""A cold build downloads go-fuse from the module proxy; a cached one takes milliseconds."""
READY_TIMEOUT_S = 15.0
"""From starting the daemon to its "ready" line (the mount is usable then)."""
CUT_TIMEOUT_S = 15.0
"""From SIGUSR1 to the daemon's exit (abort, lazy unmount, FUSE loops stopped)."""


def build_lossyfs() -> Path:
    """The lossyfs binary, built if its sources changed; fails loudly without Go."""
    built = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT_S, check=False)
    if built.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT} failed (exit {built.returncode}):\n{built.stderr}")
    return Path(built.stdout.strip().splitlines()[-1])


def is_mounted(mount_point: Path) -> bool:
    target = str(mount_point.resolve())
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts)


class LossyMount:
    """One lossyfs daemon at a time over `backing`, mounted at `mount_point`."""

    def __init__(self, binary: Path, backing: Path, mount_point: Path, *, log_path: Path) -> None:
        self.binary = binary
        self.backing = backing
        self.mount_point = mount_point
        self.staging = backing.with_name(backing.name + ".staging")
        self.log_path = log_path
        self.mount_count = 0
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        assert self._process is None, "already mounted"
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mount_point.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as log:
            self._process = subprocess.Popen(
                [str(self.binary), "-backing", str(self.backing), "-staging", str(self.staging),
                 "-mount", str(self.mount_point)],
                stdout=subprocess.PIPE, stderr=log, text=True)
        assert self._process.stdout is not None
        readable, _, _ = select.select([self._process.stdout], [], [], READY_TIMEOUT_S)
        line = self._process.stdout.readline() if readable else ""
        if not line.startswith("ready "):
            self.close()
            raise RuntimeError(f"lossyfs did not mount {self.mount_point} within "
                               f"{READY_TIMEOUT_S} s (said {line!r}); log: "
                               f"{self.log_path.read_text()[-2000:]}")
        self.mount_count += 1

    def cut_power(self) -> None:
        """Drop everything volatile and unmount; the backing directory keeps what survived."""
        process = self._process
        assert process is not None, "not mounted"
        process.send_signal(signal.SIGUSR1)
        try:
            output, _ = process.communicate(timeout=CUT_TIMEOUT_S)
        finally:
            if process.poll() is None:
                self.close()
        self._process = None
        if process.returncode != 0 or "power cut" not in output or is_mounted(self.mount_point):
            self.close()
            raise RuntimeError(f"lossyfs power cut failed (exit {process.returncode}, said "
                               f"{output!r}); log: {self.log_path.read_text()[-2000:]}")

    def remount(self) -> None:
        self.cut_power()
        self.start()

    def close(self) -> None:
        """Finalizer: cut the power if mounted; a daemon that does not stop is killed, and
        a mount left behind is detached (its connection died with the daemon)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGUSR1)
            try:
                process.wait(timeout=CUT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None and process.stdout is not None:
            process.stdout.close()
        if is_mounted(self.mount_point):
            subprocess.run(["fusermount3", "-u", "-z", str(self.mount_point)], check=False,
                           capture_output=True)
        shutil.rmtree(self.staging, ignore_errors=True)  # orphans of a killed daemon
