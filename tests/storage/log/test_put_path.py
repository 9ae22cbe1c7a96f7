"""The put path's cheap parts: the commit wakeup skipped while pending, the batch's
transaction check folded into its encoding loop (its reason still comes first)."""

from __future__ import annotations

import time
from pathlib import Path

from mqstore.storage import FlushMode, Message, MessageStore, PutStatus
from mqstore.storage.service_thread import ServiceThread
from mqstore.storage.wiring import _unless_woken
from tests.conftest import small_config

TRANSACTION_PREPARED = 0x4


class _Idle(ServiceThread):
    """A service that is never started: only its wakeup is looked at."""

    def run_once(self) -> None:
        raise AssertionError("not started")


def test_the_wakeup_is_skipped_only_while_it_is_pending() -> None:
    service = _Idle(on_fatal=lambda name, error: None)
    calls: list[int] = []

    def wake(end_position: int) -> None:
        calls.append(end_position)
        service.wakeup()

    after_append = _unless_woken(service, wake)
    after_append(100)
    after_append(200)  # pending: nothing the call could add
    service.wait_for_running(0)  # the service takes the wakeup
    after_append(300)
    assert calls == [100, 300]


def test_puts_still_wake_the_commit_service(store_dir: Path) -> None:
    """Pool on, a commit interval far longer than the test: only the appends' wakeups can
    make the commit service copy the pooled bytes into the file."""
    config = small_config(pool_enabled=True, pool_buffer_count=2, commit_interval_ms=600_000,
                          commit_thorough_interval_ms=600_000, commit_pages_min=1,
                          flush_mode=FlushMode.ASYNC)
    with MessageStore.open(store_dir, config) as store:
        for round_index in range(3):
            results = [store.put(Message("W", 0, b"%d" % i * 200)) for i in range(30)]
            assert all(result.ok for result in results)
            batch = store.put_batch([Message("W", 1, b"b" * 300)] * 8)
            end = batch[-1].end_position
            deadline = time.monotonic() + 30
            while store.committed_position < end - 4096 and time.monotonic() < deadline:
                time.sleep(0.005)
            assert store.committed_position >= end - 4096, f"round {round_index}"


def test_a_transaction_message_is_the_batchs_reason_before_an_illegal_one(
        store: MessageStore) -> None:
    results = store.put_batch([Message("bad topic", 0, b"a"),
                               Message("Tx", 0, b"b", sysflag=TRANSACTION_PREPARED)])
    assert {r.status for r in results} == {PutStatus.MESSAGE_ILLEGAL}
    assert "transaction" in results[0].reason
    results = store.put_batch([Message("Tx", 0, b"a", sysflag=TRANSACTION_PREPARED),
                               Message("Tx", 0, b"b", sysflag=-1)])
    assert "transaction" in results[1].reason
    assert store.written_position == 0


def test_an_illegal_message_without_transactions_names_its_index(store: MessageStore) -> None:
    results = store.put_batch([Message("T", 0, b"a"), Message("T", 0, b"b", flag=1 << 40),
                               Message("bad topic", 0, b"c")])
    assert {r.status for r in results} == {PutStatus.MESSAGE_ILLEGAL}
    assert results[0].reason.startswith("message 1 of the batch: flag=")
    assert store.put_batch([Message("T", 0, b"ok")] * 2)[1].queue_offset == 1
