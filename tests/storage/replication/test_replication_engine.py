"""The engine's side of replication, without sockets: `read_log` on a master, `append_raw` on a
follower, and the sync master's acknowledgements (storage/replication/replication.py and
storage/replication/follower_sync.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mqstore.storage import (
    BrokerRole,
    ConfigError,
    FlushMode,
    Message,
    MessageStore,
    PutStatus,
    ReplicationGapError,
)
from mqstore.storage.replication.follower_sync import FollowerPositions
from mqstore.storage.replication.replication import LogRangeError
from tests.conftest import SMALL_SEGMENT_BYTES, small_config

BATCH_BYTES_MAX = 8 * 1024


def fill(store: MessageStore, count: int, *, body_bytes: int = 700) -> None:
    for index in range(count):
        result = store.put(Message("Repl", index % 3, bytes([index % 251]) * body_bytes,
                                   keys=(f"k{index}",)))
        assert result.status is PutStatus.PUT_OK, result


def copy_all(master: MessageStore, follower: MessageStore, *, start: int | None = None) -> int:
    """Ship what the master has, as the server does: chunks from where the follower ends."""
    position = master.replication.check_start(follower.written_position if start is None
                                              else start)
    frames = 0
    while True:
        chunk = master.replication.read_log(position, size_bytes_max=BATCH_BYTES_MAX)
        if not chunk:
            return frames
        position = follower.replication.append_raw(position, chunk)
        frames += 1


def segment_bytes(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((directory / "commitlog").iterdir())}


def follower_config(**overrides: object) -> object:
    return small_config(role=BrokerRole.FOLLOWER, **overrides)


def test_follower_log_is_the_masters_byte_for_byte_and_dispatches(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "m", small_config()) as master, \
            MessageStore.open(tmp_path / "f", follower_config()) as follower:
        fill(master, 300)  # 300 × ~800 B: four 64 KiB segments, BLANK tails included
        assert master.segment_count >= 4
        assert copy_all(master, follower) > master.segment_count
        assert follower.written_position == master.written_position
        ends = [master.written_position]
        # The follower's own dispatch builds its consume queues from the copied log.
        deadline = time.monotonic() + 10
        while follower.max_offset("Repl", 2) < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        with follower.get("Repl", 2, 0, 32) as pulled, master.get("Repl", 2, 0, 32) as mine:
            assert [bytes(m.body) for m in pulled.messages] == \
                [bytes(m.body) for m in mine.messages]
        assert [m.physical_offset for m in follower.query_by_key("Repl", "k17")] == \
            [m.physical_offset for m in master.query_by_key("Repl", "k17")]
    # Compared after both closed: the files, preallocated tails and all.
    master_files, follower_files = segment_bytes(tmp_path / "m"), segment_bytes(tmp_path / "f")
    written = [name for name in master_files if int(name) < ends[0]]
    assert written and all(master_files[name] == follower_files[name] for name in written)
    with MessageStore.open(tmp_path / "f", follower_config()) as reopened:
        assert reopened.recovery_report.truncated_bytes == 0
        assert reopened.written_position == ends[0]


def test_a_lagging_follower_resumes_where_its_log_ends(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "m", small_config()) as master:
        fill(master, 50)
        with MessageStore.open(tmp_path / "f", follower_config()) as follower:
            copy_all(master, follower)
        fill(master, 150)
        with MessageStore.open(tmp_path / "f", follower_config()) as follower:
            copy_all(master, follower)
            assert follower.written_position == master.written_position
            assert [m.body for m in follower.iter_messages()] == \
                [m.body for m in master.iter_messages()]


def test_gap_overlap_and_cut_records_are_refused_and_nothing_is_appended(
        tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "m", small_config()) as master, \
            MessageStore.open(tmp_path / "f", follower_config()) as follower:
        fill(master, 20)
        chunk = master.replication.read_log(0, size_bytes_max=BATCH_BYTES_MAX)
        with pytest.raises(ReplicationGapError, match="segment boundary"):
            follower.replication.append_raw(100, chunk)
        end = follower.replication.append_raw(0, chunk)
        for wrong in (0, end - 8, end + 8):  # overlap, overlap, gap
            with pytest.raises(ReplicationGapError, match="this log ends at"):
                follower.replication.append_raw(wrong, chunk)
        rest = master.replication.read_log(end, size_bytes_max=BATCH_BYTES_MAX)
        with pytest.raises(ReplicationGapError, match="not whole records"):
            follower.replication.append_raw(end, rest[:-1])
        with pytest.raises(ReplicationGapError, match="not whole records"):
            follower.replication.append_raw(end, rest[100:])
        assert follower.written_position == end
        assert follower.replication.append_raw(end, rest) == end + len(rest)


def test_read_log_cuts_at_record_boundaries_within_one_segment(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "m", small_config()) as master:
        fill(master, 200)
        sizes = {m.physical_offset: m.total_size for m in master.iter_messages()}
        position = 0
        while position < master.written_position:
            chunk = master.replication.read_log(position, size_bytes_max=3000)
            assert chunk
            end = position + len(chunk)
            assert end in sizes or end % SMALL_SEGMENT_BYTES == 0 or end == master.written_position
            assert position // SMALL_SEGMENT_BYTES == (end - 1) // SMALL_SEGMENT_BYTES
            position = end
        assert master.replication.read_log(position, size_bytes_max=3000) == b""
        with pytest.raises(LogRangeError):
            master.replication.read_log(position + SMALL_SEGMENT_BYTES, size_bytes_max=3000)
        with pytest.raises(LogRangeError):
            master.replication.check_start(position + 1)
        assert master.replication.check_start(0) == master.min_position


def test_an_empty_follower_may_start_at_a_later_segment_and_keeps_it(tmp_path: Path) -> None:
    """The master's retention deleted its first segments: an empty follower starts where the
    master's log starts now, and a restart neither cuts it nor invents a segment 0."""
    with MessageStore.open(tmp_path / "m", small_config()) as master, \
            MessageStore.open(tmp_path / "f", follower_config()) as follower:
        fill(master, 200)
        copy_all(master, follower, start=2 * SMALL_SEGMENT_BYTES)
        end = follower.written_position
        assert follower.min_position == 2 * SMALL_SEGMENT_BYTES
    with MessageStore.open(tmp_path / "f", follower_config()) as reopened:
        assert (reopened.min_position, reopened.written_position) == (2 * SMALL_SEGMENT_BYTES, end)
        assert reopened.flushed_position == end


def test_a_follower_refuses_puts_and_a_pooled_follower_is_refused(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "f", follower_config()) as follower:
        result = follower.put(Message("T", 0, b"x"))
        assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "follower" in result.reason
        assert follower.written_position == 0
    with pytest.raises(ConfigError, match="pool"):
        small_config(role=BrokerRole.FOLLOWER, pool_enabled=True)
    with pytest.raises(ConfigError, match="filler"):
        small_config(role=BrokerRole.FOLLOWER, flush_mode=FlushMode.SYNC,
                     group_commit_align_bytes=4096)


def sync_master(tmp_path: Path, **overrides: object) -> MessageStore:
    settings: dict[str, object] = {"replication_sync_timeout_ms": 300, **overrides}
    return MessageStore.open(tmp_path / "m",
                             small_config(role=BrokerRole.SYNC_MASTER, **settings))


def test_sync_master_without_a_close_follower_answers_slave_not_available_at_once(
        tmp_path: Path) -> None:
    with sync_master(tmp_path, replication_lag_bytes_max=4096) as master:
        started = time.monotonic()
        result = master.put(Message("T", 0, b"x"))
        assert result.status is PutStatus.SLAVE_NOT_AVAILABLE
        assert time.monotonic() - started < 0.25
        assert master.message_at(result.physical_offset).body == b"x"  # stored here
        progress = master.replication.progress
        assert progress is not None
        progress.connect("f1", 0)
        fill_result = master.put_batch([Message("T", 0, b"y" * 3000) for _ in range(3)])
        assert fill_result[-1].status is PutStatus.SLAVE_NOT_AVAILABLE  # over 4096 behind
        progress.disconnect("f1")


def test_sync_master_times_out_then_confirms(tmp_path: Path) -> None:
    with sync_master(tmp_path) as master:
        progress = master.replication.progress
        assert progress is not None
        progress.connect("f1", 0)
        started = time.monotonic()
        late = master.put(Message("T", 0, b"late"))
        assert late.status is PutStatus.FLUSH_SLAVE_TIMEOUT
        assert "300 ms" in late.reason
        assert 0.25 < time.monotonic() - started < 3
        future = master.submit(Message("T", 0, b"on time"))
        assert not future.done()
        end = master.written_position
        threading.Timer(0.05, progress.confirm, ("f1", end)).start()
        assert future.result(timeout=5).status is PutStatus.PUT_OK
        # Already covered: answered at once.
        progress.confirm("f1", end + 10_000)
        assert master.put(Message("T", 0, b"x")).status is PutStatus.PUT_OK


def test_a_put_waiting_when_the_last_follower_leaves_is_answered_at_once(
        tmp_path: Path) -> None:
    """A follower stopping for a roll: what waits for it is SLAVE_NOT_AVAILABLE (stored
    here) as it disconnects, not FLUSH_SLAVE_TIMEOUT at the deadline."""
    with sync_master(tmp_path, replication_sync_timeout_ms=10_000) as master:
        progress = master.replication.progress
        assert progress is not None
        progress.connect("f1", 0)
        progress.connect("f2", 0)
        waiting = master.submit(Message("T", 0, b"in flight"))
        progress.disconnect("f1")
        assert not waiting.done(), "f2 may still confirm it"
        started = time.monotonic()
        threading.Timer(0.05, progress.disconnect, ("f2",)).start()
        result = waiting.result(timeout=5)
        assert time.monotonic() - started < 2, "answered at the disconnect, not the deadline"
        assert result.status is PutStatus.SLAVE_NOT_AVAILABLE
        assert "disconnected" in result.reason
        assert master.message_at(result.physical_offset).body == b"in flight"


@pytest.mark.parametrize("flush_mode", [FlushMode.ASYNC, FlushMode.SYNC])
def test_sync_master_with_pool_commits_on_demand(tmp_path: Path, flush_mode: FlushMode) -> None:
    """RocketMQ issue #1372: the bytes must be readable (committed) as soon as a producer waits, not
    after the commit service's 16 KiB / 200 ms (here set to 4 MiB / 60 s): the sender's read
    commits on demand."""
    with sync_master(tmp_path, pool_enabled=True, flush_mode=flush_mode,
                     commit_interval_ms=60_000, commit_thorough_interval_ms=60_000,
                     commit_pages_min=1000) as master:
        progress = master.replication.progress
        assert progress is not None
        progress.connect("f1", 0)
        future = master.submit(Message("T", 0, b"small"))
        if flush_mode is FlushMode.ASYNC:  # (the group commit commits on demand itself)
            assert master.committed_position < master.written_position  # the service waits
        chunk = master.replication.read_log(0, size_bytes_max=BATCH_BYTES_MAX)
        assert len(chunk) == master.written_position == master.committed_position
        progress.confirm("f1", len(chunk))
        assert future.result(timeout=5).status is PutStatus.PUT_OK
        if flush_mode is FlushMode.SYNC:
            assert master.flushed_position >= len(chunk)


def test_a_follower_confirms_before_the_transfer_closes_pending_puts(tmp_path: Path) -> None:
    master = sync_master(tmp_path, replication_sync_timeout_ms=60_000)
    progress = master.replication.progress
    assert progress is not None
    progress.connect("f1", 0)
    futures = [master.submit(Message("T", 0, bytes(10))) for _ in range(5)]
    progress.confirm("f1", 10)  # less than the first put's end: completes none
    assert not any(future.done() for future in futures)
    master.close()  # pending requests end: stored, not confirmed
    assert {f.result(timeout=5).status for f in futures} == {PutStatus.FLUSH_SLAVE_TIMEOUT}


def test_followers_in_sync_are_those_within_the_lag_bound() -> None:
    """What a sync put may wait for, counted (the operator's roll asks for every follower)."""
    positions = FollowerPositions(on_replicated=lambda position: None)
    assert positions.count_within_lag(1000, lag_bytes_max=100) == 0
    positions.connect("a", 950)
    positions.connect("b", 900)
    assert positions.count_within_lag(1000, lag_bytes_max=100) == 1  # b is 100 behind: not less
    assert positions.within_lag(1000, lag_bytes_max=100)
    positions.confirm("b", 990)
    assert positions.count_within_lag(1000, lag_bytes_max=100) == 2
    positions.disconnect("a")
    assert positions.count_within_lag(1000, lag_bytes_max=100) == 1
    assert not positions.within_lag(2000, lag_bytes_max=100)
