"""lossyfs itself, through the kernel: what a power cut keeps and drops, and that every file
operation the engine uses works on the mount (see tests/powerloss/lossyfs/README.md).

Each test writes through the mount, cuts the power (`remount`), and reads what came back.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.storage.files.preallocate import populate_for_write
from tests.powerloss.mount import LossyMount, is_mounted

pytestmark = pytest.mark.powerloss

PAGE_BYTES = 4096


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def close_after_cut(fd: int, mapping: mmap.mmap | None = None) -> None:
    """Close what was opened on a mount whose power was cut: close() reports ENOTCONN."""
    if mapping is not None:
        mapping.close()
    with contextlib.suppress(OSError):
        os.close(fd)


def durable_file(mount: LossyMount, name: str, data: bytes) -> Path:
    """A file whose data and name are both synced."""
    path = mount.mount_point / name
    write_file(path, data, sync=True)
    fsync_dir(path.parent)
    return path


def test_unsynced_write_is_lost(lossy_mount: LossyMount) -> None:
    path = durable_file(lossy_mount, "a", b"old contents")
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    os.pwrite(fd, b"NEW", 0)
    os.ftruncate(fd, 6)
    os.close(fd)  # close is no sync
    assert path.read_bytes() == b"NEW co"
    lossy_mount.remount()
    assert path.read_bytes() == b"old contents"


def test_synced_write_is_kept(lossy_mount: LossyMount) -> None:
    path = durable_file(lossy_mount, "a", b"old contents")
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    os.pwrite(fd, b"NEW", 0)
    os.fdatasync(fd)
    os.close(fd)
    lossy_mount.remount()
    assert path.read_bytes() == b"NEW contents"


def test_file_synced_in_an_unsynced_directory_is_gone(lossy_mount: LossyMount) -> None:
    write_file(lossy_mount.mount_point / "a", b"data", sync=True)
    (lossy_mount.mount_point / "d").mkdir()
    lossy_mount.remount()
    assert sorted(os.listdir(lossy_mount.mount_point)) == []
    assert sorted(os.listdir(lossy_mount.backing)) == []


def test_name_synced_without_its_data_comes_back_empty(lossy_mount: LossyMount) -> None:
    path = lossy_mount.mount_point / "a"
    write_file(path, b"data", sync=False)
    fsync_dir(path.parent)
    lossy_mount.remount()
    assert path.read_bytes() == b""


def test_rename_is_durable_only_after_the_directory_fsync(lossy_mount: LossyMount) -> None:
    root = lossy_mount.mount_point
    durable_file(lossy_mount, "target", b"old")
    write_file(root / "target.tmp", b"new", sync=True)
    os.rename(root / "target.tmp", root / "target")
    lossy_mount.remount()
    assert sorted(os.listdir(root)) == ["target"]
    assert (root / "target").read_bytes() == b"old"
    write_file(root / "target.tmp", b"new", sync=True)
    os.rename(root / "target.tmp", root / "target")
    fsync_dir(root)
    lossy_mount.remount()
    assert sorted(os.listdir(root)) == ["target"]
    assert (root / "target").read_bytes() == b"new"


def _mapped_file(mount: LossyMount, size_bytes: int) -> tuple[Path, int, mmap.mmap]:
    path = mount.mount_point / "mapped"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    os.posix_fallocate(fd, 0, size_bytes)
    os.fsync(fd)
    fsync_dir(path.parent)
    return path, fd, mmap.mmap(fd, size_bytes, mmap.MAP_SHARED)


@pytest.mark.parametrize("sync", ["fdatasync", "msync"])
def test_mmap_write_then_sync_is_kept(lossy_mount: LossyMount, sync: str) -> None:
    path, fd, mapping = _mapped_file(lossy_mount, 16 * PAGE_BYTES)
    mapping[PAGE_BYTES - 2:PAGE_BYTES + 3] = b"hello"
    mapping[15 * PAGE_BYTES:15 * PAGE_BYTES + 4] = b"tail"
    if sync == "fdatasync":
        os.fdatasync(fd)
    else:
        mapping.flush()
    lossy_mount.remount()  # the mapping outlives the mount, as an engine killed late would
    close_after_cut(fd, mapping)
    data = path.read_bytes()
    assert len(data) == 16 * PAGE_BYTES
    assert data[PAGE_BYTES - 2:PAGE_BYTES + 3] == b"hello"
    assert data[15 * PAGE_BYTES:15 * PAGE_BYTES + 4] == b"tail"
    assert (lossy_mount.backing / "mapped").read_bytes() == data


def test_mmap_write_without_sync_is_lost(lossy_mount: LossyMount) -> None:
    path, fd, mapping = _mapped_file(lossy_mount, 16 * PAGE_BYTES)
    mapping[0:5] = b"first"
    os.fdatasync(fd)
    mapping[0:5] = b"later"
    mapping[8 * PAGE_BYTES:8 * PAGE_BYTES + 5] = b"never"
    assert path.read_bytes()[:5] == b"later"  # the page cache serves the unsynced bytes
    lossy_mount.remount()
    close_after_cut(fd, mapping)
    data = path.read_bytes()
    assert data[:5] == b"first"
    assert data[8 * PAGE_BYTES:8 * PAGE_BYTES + 5] == bytes(5)


def test_the_file_operations_the_engine_uses(lossy_mount: LossyMount) -> None:
    root = lossy_mount.mount_point
    (root / "creating").mkdir()
    (root / "commitlog").mkdir()
    creating = root / "creating" / "segment"
    fd = os.open(creating, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    with pytest.raises(FileExistsError):
        os.open(creating, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    os.ftruncate(fd, 4 * PAGE_BYTES)
    os.posix_fallocate(fd, 0, 8 * PAGE_BYTES)
    assert os.fstat(fd).st_size == 8 * PAGE_BYTES
    mapping = mmap.mmap(fd, 8 * PAGE_BYTES, mmap.MAP_SHARED)
    assert populate_for_write(mapping)  # madvise(MADV_POPULATE_WRITE)
    mapping[:4] = b"head"
    os.fdatasync(fd)
    durable_file(lossy_mount, "commitlog/segment", b"to be replaced")
    os.rename(creating, root / "commitlog" / "segment")  # over an existing name
    fsync_dir(root / "commitlog")
    (root / "empty").mkdir()
    (root / "empty").rmdir()
    (root / "creating" / "leftover").write_bytes(b"x")
    (root / "creating" / "leftover").unlink()
    fsync_dir(root / "creating")
    fsync_dir(root)
    lossy_mount.remount()
    close_after_cut(fd, mapping)
    assert sorted(os.listdir(root)) == ["commitlog", "creating"]
    assert os.listdir(root / "creating") == []
    assert (root / "commitlog" / "segment").read_bytes() == b"head" + bytes(8 * PAGE_BYTES - 4)


def test_posix_record_locks_exclude_another_process(lossy_mount: LossyMount) -> None:
    path = lossy_mount.mount_point / "lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        probe = ("import fcntl, os, sys\n"
                 f"fd = os.open({str(path)!r}, os.O_RDWR)\n"
                 "try:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)\n"
                 "except OSError:\n    sys.exit(3)\n")
        assert subprocess.run([sys.executable, "-c", probe], check=False).returncode == 3
    finally:
        os.close(fd)


def test_power_cut_unmounts_and_fails_open_descriptors(lossy_mount: LossyMount) -> None:
    path = durable_file(lossy_mount, "a", b"data")
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    lossy_mount.cut_power()
    try:
        assert not is_mounted(lossy_mount.mount_point)
        with pytest.raises(OSError):
            os.pwrite(fd, b"late", 0)
            os.fsync(fd)
    finally:
        close_after_cut(fd)
    assert (lossy_mount.backing / "a").read_bytes() == b"data"
    lossy_mount.start()
    assert path.read_bytes() == b"data"
