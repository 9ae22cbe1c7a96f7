"""`mqstore preallocate --config FILE`: the first commit log segment of a new store, made
before the writer starts (the Broker pod's init container runs it).

Only the first segment: recovery deletes segments past the end of the log, so more would
be undone when the writer opens the store, and the writer's allocator prepares the next
one in the background (`preallocate_ahead_count`).  A directory that already has a
segment is left alone, so the init container can run at every pod start."""

from __future__ import annotations

import time

from mqstore.services.common.settings.config_file import ServiceConfig
from mqstore.storage import ConfigError, StoreError
from mqstore.storage.files.io import make_directories
from mqstore.storage.files.segment import CommitLogSegment
from mqstore.storage.format.volume import (
    COMMITLOG_DIRECTORY,
    CREATING_DIRECTORY,
    creating_name,
    offset_file_name,
)

SEGMENT_NAME_LENGTH = 20
"""Segment files are named by their start position in 20 decimal digits."""


def preallocate_first_segment(config: ServiceConfig) -> str:
    """Create and prepare `commitlog/00000000000000000000` per the store settings; returns
    what was done.  ConfigError for a data_dir that is not a directory, StoreError when
    the segment cannot be made (a full disk, say)."""
    if config.data_dir.exists() and not config.data_dir.is_dir():
        raise ConfigError(f"{config.source}: data_dir {config.data_dir} is not a directory")
    commitlog = config.data_dir / "commitlog"
    commitlog.mkdir(parents=True, exist_ok=True)
    existing = sorted(path.name for path in commitlog.iterdir()
                      if len(path.name) == SEGMENT_NAME_LENGTH and path.name.isdigit())
    if existing:
        return (f"{commitlog}: {len(existing)} segment(s) already, from {existing[0]}; "
                f"nothing to do")
    store = config.store
    method = store.effective_preallocate_method
    started = time.perf_counter()
    try:
        creating = config.data_dir / CREATING_DIRECTORY
        make_directories(creating, root=config.data_dir)
        segment = CommitLogSegment.create(commitlog, start_position=0, creating=creating /
                                          creating_name(COMMITLOG_DIRECTORY, offset_file_name(0)),
                                          size_bytes=store.segment_size_bytes, method=method,
                                          warmup=store.segment_warmup_enabled)
    except OSError as error:
        raise StoreError(f"creating {commitlog / offset_file_name(0)}: {error}") from None
    segment.close()
    return (f"{segment.path}: {store.segment_size_bytes} bytes prepared ({method.value}) in "
            f"{time.perf_counter() - started:.2f} s")
