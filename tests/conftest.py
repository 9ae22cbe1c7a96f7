"""Shared fixtures: small segments so rolls, BLANKs and recovery happen in milliseconds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.storage import MessageStore, StoreConfig

SMALL_SEGMENT_BYTES = 64 * 1024


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
