"""Engine bugs the power-loss test found, each reduced to a deterministic reproduction.

- Files recovery deletes (segments past the log's end; consume queue and index files past
  it, through the same `MappedFile.close(delete=True)`) are unlinked without a sync of their
  directory, so a power cut brings them back: a cleanly closed store then fails
  `mqstore verify` (a consume queue file after a partial one) and its next open cuts again.
- A cleanly closed store whose last `recovery_segments_max` (3) segments are empty did not
  open: normal recovery CRC-checked only those, took the unverified segment before them as
  full, and dispatch then found zeros inside the log (DispatchCorruptError).  Resurrected
  segments (above) made such a store; so did `preallocate_ahead_count=3`.  Fixed on
  integrity (f0c23b2: the window counts segments that hold data).
- With `positions_publish_enabled` (the split deployment's writer; the embedded indexer then
  publishes `dispatched` too), the watermark files were created at full size by ftruncate and
  renamed into place without a sync; the store directory's next sync made the name durable,
  so a power cut left them at 0 bytes and the next open refused them (StoreFormatError).
  Fixed on integrity (f0c23b2: short watermark files are made anew).
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
from mqstore.storage.recovery.scrub import verify_store
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


PUT_ONE = "assert store.put(Message('Regression', 0, b'acked')).ok\n"


def _put_then_wait_for_the_cut(store_dir: Path, config_code: str,
                               put_code: str = PUT_ONE) -> subprocess.Popen[str]:
    """A process that opens the store, runs `put_code` (one put by default), says "acked",
    and waits (for the power cut and its kill)."""
    code = ("import sys, threading\n"
            "from mqstore.storage import FlushMode, Message, MessageStore, StoreConfig\n"
            f"store = MessageStore.open({str(store_dir)!r}, {config_code})\n"
            f"{put_code}"
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


def test_consume_queue_files_recovery_deletes_stay_deleted_after_a_power_cut(
        lossy_mount: LossyMount) -> None:
    """500 messages closed cleanly; then 600 more under async flush that never syncs the log,
    enough for dispatch to create the queue's second file (1024 entries a file); power cut.
    Recovery ends the log after the 500 and deletes the second file; a clean close and a power
    cut later, the file must still be gone and the store must verify clean."""
    store_dir = lossy_mount.mount_point / "store"
    store_dir.mkdir()
    _fsync_directory(lossy_mount.mount_point)
    never_synced = {"flush_interval_ms": 600_000, "flush_thorough_interval_ms": 600_000}
    config = StoreConfig.for_small_segments(1 << 20, flush_mode=FlushMode.ASYNC, **never_synced)
    config_code = (f"StoreConfig.for_small_segments(1 << 20, flush_mode=FlushMode.ASYNC, "
                   f"**{never_synced!r})")
    with MessageStore.open(store_dir, config) as store:
        for sequence in range(500):
            assert store.put(Message("Regression", 0, b"%d" % sequence)).ok
    more = ("for sequence in range(600):\n"
            "    assert store.put(Message('Regression', 0, b'more %d' % sequence)).ok\n"
            "assert store.wait_dispatched(timeout_ms=10_000)\n")
    _cut_and_kill(lossy_mount, _put_then_wait_for_the_cut(store_dir, config_code, more))
    second = store_dir / "consumequeue" / "Regression" / "0" / f"{20 * 1024:020d}"
    assert second.exists(), "precondition: the second queue file's name was made durable"
    with MessageStore.open(store_dir, config) as store:
        assert store.max_offset("Regression", 0) == 500
    assert not second.exists(), "precondition: recovery deleted the second queue file"
    lossy_mount.remount()
    _, corruptions = verify_store(store_dir)
    assert not second.exists() and not corruptions, (
        f"after a clean close and a power cut, {second.name} (deleted at the last open) is "
        f"back; mqstore verify: {[str(c) for c in corruptions]}")


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
