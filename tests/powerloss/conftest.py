"""Pytest wiring for the power-loss tests: lossyfs built once per session, mounts cleaned up.

They need Go (to build lossyfs), /dev/fuse, fusermount3 and root (fusectl's abort file);
without them they fail, never skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.powerloss.mount import LossyMount, build_lossyfs

SUMMARIES = pytest.StashKey[list[str]]()
"""Each power-loss configuration's summary, printed again at the end of the session."""


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SUMMARIES] = []
    config.addinivalue_line(
        "markers",
        "powerloss: mounts lossyfs, a FUSE file system that drops unsynced writes at a power "
        "cut (needs Go, /dev/fuse, fusermount3, root; deselect with -m 'not powerloss')",
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    summaries = config.stash.get(SUMMARIES, [])
    if summaries:
        terminalreporter.section("power loss (lossyfs)")
        for summary in summaries:
            terminalreporter.write_line(summary)


@pytest.fixture
def power_loss_summaries(request: pytest.FixtureRequest) -> list[str]:
    """Append a configuration's summary text here to have it printed at the session's end."""
    return request.config.stash[SUMMARIES]


@pytest.fixture(scope="session")
def lossyfs_binary() -> Path:
    return build_lossyfs()


@pytest.fixture
def lossyfs(lossyfs_binary: Path, tmp_path: Path) -> Iterator[LossyMount]:
    """lossyfs over tmp_path/backing, not yet mounted; whatever happens, no daemon and no
    mount outlive the test."""
    mount = LossyMount(lossyfs_binary, tmp_path / "backing", tmp_path / "mnt",
                       log_path=tmp_path / "lossyfs.log")
    try:
        yield mount
    finally:
        mount.close()


@pytest.fixture
def lossy_mount(lossyfs: LossyMount) -> LossyMount:
    """lossyfs mounted over tmp_path/backing."""
    lossyfs.start()
    return lossyfs
