"""Cut the link between a master and its follower and restore it: the follower catches up.

The scenario (replication_link_cut.py) runs in network namespaces it creates: `unshare -n` for
itself and the master, a second namespace for the follower, a veth pair between them.  It
needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN), `unshare`, `nsenter` and `ip`; without them this
test fails, saying which, rather than skip.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.processes import module_command


def test_link_cut_and_restored_follower_catches_up(tmp_path: Path) -> None:
    missing = [tool for tool in ("unshare", "nsenter", "ip") if shutil.which(tool) is None]
    assert not missing, f"this test needs {missing} (util-linux, iproute2) and root"
    command = ["unshare", "-n", *module_command("tests.integration.replication_link_cut"),
               str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    assert output.startswith("OK "), output[-5000:]
