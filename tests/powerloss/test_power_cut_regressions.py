"""Engine bugs the power-loss test found, each reduced to a deterministic reproduction.

- Files recovery deletes (segments past the log's end; consume queue and index files past
  it, through the same `MappedFile.close(delete=True)`) are unlinked without a sync of their
  directory, so a power cut brings them back.
- A cleanly closed store whose last `recovery_segments_max` (3) segments are empty does not
  open: normal recovery CRC-checks only those, takes the unverified segment before them as
  full, and dispatch then finds zeros inside the log (DispatchCorruptError).  Resurrected
  segments (above) make such a store; so does `preallocate_ahead_count=3`.
- With `positions_publish_enabled` (the split deployment's writer; the embedded indexer then
  publishes `dispatched` too), the watermark files are created at full size by ftruncate and
  renamed into place without a sync; the store directory's next sync makes the name durable,
  so a power cut leaves them at 0 bytes and the next open refuses them (StoreFormatError).
- `MessageStore.open` creates a missing store directory without syncing its parent: a
  sync-flush PUT_OK into it is lost with the directory at a power cut.  (ext4 would keep the
  directory when the segment's fsync commits its journal; POSIX promises nothing.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.storage import FlushMode, Message, MessageStore, StoreConfig
from tests.powerloss.mount import LossyMount

pytestmark = pytest.mark.powerloss

SEGMENT_BYTES = 64 * 1024
MESSAGE_COUNT = 150
"""150 records of ~1.1 KiB: the log ends inside the third 64 KiB segment."""


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _put_then_wait_for_the_cut(store_dir: Path, config_code: str) -> subprocess.Popen[str]:
    """A process that opens the store, puts one message under sync flush, says "acked", and
    waits (for the power cut and its kill)."""
    code = ("import sys, threading\n"
            "from mqstore.storage import FlushMode, Message, MessageStore, StoreConfig\n"
            f"store = MessageStore.open({str(store_dir)!r}, {config_code})\n"
            "assert store.put(Message('Regression', 0, b'acked')).ok\n"
            "print('acked', flush=True)\n"
            "threading.Event().wait()\n")
    process = subprocess.Popen([sys.executable, "-P", "-c", code], stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout is not None
    assert process.stdout.readline() == "acked\n"
    return process


def _cut_and_kill(mount: LossyMount, process: subprocess.Popen[str]) -> None:
    try:
        mount.remount()
    finally:
        process.kill()
        process.communicate()


def _fill_and_close(store_dir: Path, config: StoreConfig) -> int:
    with MessageStore.open(store_dir, config) as store:
        for sequence in range(MESSAGE_COUNT):
            assert store.put(Message("Regression", 0, b"%d:" % sequence + bytes(1000))).ok
        return store.written_position


def test_segments_recovery_deletes_stay_deleted_after_a_power_cut(
        lossy_mount: LossyMount) -> None:
    store_dir = lossy_mount.mount_point / "store"
    store_dir.mkdir()
    _fsync_directory(lossy_mount.mount_point)
    config = StoreConfig.for_small_segments(SEGMENT_BYTES, flush_mode=FlushMode.SYNC)
    end_position = _fill_and_close(store_dir, config)
    with MessageStore.open(store_dir, config) as store:  # recovery removes what is past the end
        deleted = store.recovery_report.deleted_segments
    assert deleted, "precondition: the segment prepared past the end was deleted at open"
    assert not set(deleted) & set(os.listdir(store_dir / "commitlog"))  # gone before the cut
    lossy_mount.remount()
    back = sorted(set(deleted) & set(os.listdir(store_dir / "commitlog")))
    assert not back, (f"recovery deleted {deleted} (the log ends at {end_position}); after a "
                      f"power cut {back} exist again: the unlink was never made durable")


def test_a_clean_store_with_three_empty_segments_after_its_end_opens(tmp_path: Path) -> None:
    config = StoreConfig.for_small_segments(SEGMENT_BYTES, flush_mode=FlushMode.SYNC,
                                            preallocate_ahead_count=3)
    end_position = _fill_and_close(tmp_path / "store", config)
    names = sorted(os.listdir(tmp_path / "store" / "commitlog"))
    empty_after_end = [name for name in names if int(name) >= end_position]
    assert len(empty_after_end) >= config.recovery_segments_max, f"precondition: {names}"
    with MessageStore.open(tmp_path / "store", config) as store:
        assert store.recovery_report.end_position == end_position
        assert store.wait_dispatched(timeout_ms=10_000)
        assert store.max_offset("Regression", 0) == MESSAGE_COUNT


def test_watermark_files_survive_a_power_cut_whole_or_not_at_all(
        lossy_mount: LossyMount) -> None:
    store_dir = lossy_mount.mount_point / "store"
    store_dir.mkdir()
    _fsync_directory(lossy_mount.mount_point)
    config_code = ("StoreConfig.for_small_segments(65536, flush_mode=FlushMode.SYNC, "
                   "positions_publish_enabled=True)")
    _cut_and_kill(lossy_mount, _put_then_wait_for_the_cut(store_dir, config_code))
    config = StoreConfig.for_small_segments(SEGMENT_BYTES, flush_mode=FlushMode.SYNC,
                                            positions_publish_enabled=True)
    with MessageStore.open(store_dir, config) as store:
        assert bytes(store.message_at(0).body) == b"acked"


def test_an_acknowledged_put_into_a_store_that_open_created_survives_a_power_cut(
        lossy_mount: LossyMount) -> None:
    store_dir = lossy_mount.mount_point / "created-by-open"
    config_code = "StoreConfig.for_small_segments(65536, flush_mode=FlushMode.SYNC)"
    _cut_and_kill(lossy_mount, _put_then_wait_for_the_cut(store_dir, config_code))
    assert store_dir.is_dir(), "the store directory open created is gone, with its PUT_OK"
    config = StoreConfig.for_small_segments(SEGMENT_BYTES, flush_mode=FlushMode.SYNC)
    with MessageStore.open(store_dir, config) as store:
        assert bytes(store.message_at(0).body) == b"acked"
