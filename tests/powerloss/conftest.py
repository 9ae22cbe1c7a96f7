"""Pytest wiring for the power-loss tests: lossyfs built once per session, mounts cleaned up.

They need Go (to build lossyfs), /dev/fuse, fusermount3 and root (fusectl's abort file);
without them they fail, never skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.powerloss.mount import LossyMount, build_lossyfs


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "powerloss: mounts lossyfs, a FUSE file system that drops unsynced writes at a power "
        "cut (needs Go, /dev/fuse, fusermount3, root; deselect with -m 'not powerloss')",
    )


@pytest.fixture(scope="session")
def lossyfs_binary() -> Path:
    return build_lossyfs()


@pytest.fixture
def lossy_mount(lossyfs_binary: Path, tmp_path: Path) -> Iterator[LossyMount]:
    """A mounted lossyfs over tmp_path/backing; unmounted (power cut) whatever happens."""
    mount = LossyMount(lossyfs_binary, tmp_path / "backing", tmp_path / "mnt",
                       log_path=tmp_path / "lossyfs.log")
    try:
        mount.start()
        yield mount
    finally:
        mount.close()
