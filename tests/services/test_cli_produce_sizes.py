"""Embedded `mqstore produce` sizes a new store with the embedded profile and keeps an
existing store's own sizes (issue 18, Found 6 and 7)."""

from __future__ import annotations

from pathlib import Path

from mqstore.services.cli.command import main
from mqstore.storage import Message, MessageStore
from tests.conftest import small_config


def test_produce_into_a_store_of_other_sizes_keeps_them(tmp_path: Path) -> None:
    made = small_config()
    with MessageStore.open(tmp_path, made) as store:
        store.put(Message("Demo", 0, b"first", keys=("k",)))
    assert main(["produce", str(tmp_path), "--count", "50", "--body-bytes", "100"]) == 0
    with MessageStore.open(tmp_path, made) as store:
        assert store.config.segment_size_bytes == made.segment_size_bytes
        assert store.next_queue_offset("Demo", 0) > 1
    assert main(["verify", str(tmp_path)]) == 0
