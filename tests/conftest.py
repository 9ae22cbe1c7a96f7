"""Shared fixtures: small segments so rolls, BLANKs and recovery happen in milliseconds."""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from mqstore.storage import MessageStore, StoreConfig

SMALL_SEGMENT_BYTES = 64 * 1024

# Services the tests start listen for the remoting protocol (9876) and forwarded sends (8085)
# by default: in tests, any free port, so a RocketMQ name server or another run on this
# machine never makes a notifier or writer fail to start.  Tests of the protocol itself
# name their ports (tests/remoting/up_process.py).
os.environ.setdefault("MQSTORE_REMOTING__PORT", "0")
os.environ.setdefault("MQSTORE_WRITER__FORWARD_PORT", "0")


_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    """A passed test's `tmp_path` is deleted as soon as it is torn down, not at the end of
    the session: a whole run writes ~30 GB of stores, and the RocketMQ brokers the remoting
    client tests start refuse writes once the disk is 90% used.  A failed test's stays
    (`tmp_path_retention_policy = "failed"` in pyproject.toml)."""
    report = yield
    assert isinstance(report, pytest.TestReport)
    if report.failed:
        item.stash[_FAILED] = True
    if report.when == "teardown" and not item.stash.get(_FAILED, False):
        path = (getattr(item, "funcargs", None) or {}).get("tmp_path")
        if isinstance(path, Path):
            shutil.rmtree(path, ignore_errors=True)
    return report


def small_config(**overrides: object) -> StoreConfig:
    return StoreConfig.for_small_segments(SMALL_SEGMENT_BYTES, **overrides)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(store_dir: Path) -> Iterator[MessageStore]:
    opened = MessageStore.open(store_dir, small_config())
    yield opened
    opened.close()
