"""`MessageStore.wait_dispatched`: a read after it finds what was put before it, whatever
the config (issue 18: with the pool on, it waited for the committed end only, which a put
not yet committed is past, and the read answered NO_MESSAGE_IN_QUEUE)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.storage import FlushMode, Message, MessageStore, StoreConfig


@pytest.mark.parametrize("pool_enabled", [True, False])
def test_a_read_after_wait_dispatched_finds_the_batch(tmp_path: Path,
                                                      pool_enabled: bool) -> None:
    config = StoreConfig.for_small_segments(1 << 20, pool_enabled=pool_enabled,
                                            flush_mode=FlushMode.ASYNC)
    with MessageStore.open(tmp_path, config) as store:
        results = store.put_batch([Message("Orders", 1, b"a"), Message("Orders", 1, b"b")])
        assert store.wait_dispatched(timeout_ms=30_000)
        with store.get("Orders", 1, 0, 32) as pulled:
            assert pulled.status.name == "FOUND"
            assert [bytes(m.body) for m in pulled.messages] == [b"a", b"b"]
        assert store.dispatched_position >= results[-1].end_position


def test_wait_for_one_put_end_position(tmp_path: Path) -> None:
    config = StoreConfig.for_small_segments(1 << 20, pool_enabled=True)
    with MessageStore.open(tmp_path, config) as store:
        result = store.put(Message("Orders", 0, b"body", keys=("order-17",)))
        assert result.end_position == result.physical_offset + result.size_bytes
        assert store.wait_dispatched(result.end_position, timeout_ms=30_000)
        assert [m.queue_offset for m in store.query_by_key("Orders", "order-17")] == [0]


def test_a_position_past_the_written_end_is_refused(tmp_path: Path) -> None:
    config = StoreConfig.for_small_segments(1 << 20)
    with MessageStore.open(tmp_path, config) as store:
        result = store.put(Message("Orders", 0, b"body"))
        with pytest.raises(ValueError, match="past the written end"):
            store.wait_dispatched(result.end_position + 1, timeout_ms=1)
