"""The lock files name who holds them: a second indexer is told an indexer is in its way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.storage import StoreLockedError
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.format import volume
from tests.conftest import small_config


def test_a_second_indexer_is_told_an_indexer_holds_the_lock(tmp_path: Path) -> None:
    """Not "another writer holds the store lock": the indexer has a lock of its own."""
    (tmp_path / volume.COMMITLOG_DIRECTORY).mkdir(parents=True)
    lock_path = tmp_path / volume.INDEXER_LOCK_FILE
    holder = subprocess.Popen(
        [sys.executable, "-P", "-c",
         "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
         "fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0); print('held', flush=True); sys.stdin.read()",
         str(lock_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"held\n"
        with pytest.raises(StoreLockedError) as raised:
            Indexer.open(tmp_path, small_config())
        assert "another indexer holds the indexer lock" in str(raised.value)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
