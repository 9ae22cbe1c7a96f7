"""Recovery: every startup case of the decision table, and damaged tails of every kind."""

from __future__ import annotations

import itertools
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqstore.storage import (
    CheckpointState,
    CorruptRecordError,
    GetStatus,
    Message,
    MessageStore,
    PutResult,
    RecoveryMode,
    StoreConfig,
    StoreFormatError,
    StoreLockedError,
)
from mqstore.storage.files.checkpoint import CheckpointValues, encode_checkpoint, read_checkpoint
from mqstore.storage.recovery.recovery import plan_recovery
from tests.conftest import SMALL_SEGMENT_BYTES, small_config


def _fill(store_dir: Path, count: int, *, body_bytes: int = 700) -> list[PutResult]:
    with MessageStore.open(store_dir, small_config()) as store:
        results = [store.put(Message("R", i % 3, bytes([i % 256]) * body_bytes, keys=(f"k{i}",)))
                   for i in range(count)]
    assert all(result.ok for result in results)
    return results


def _segment_path(store_dir: Path, physical_offset: int) -> tuple[Path, int]:
    start = physical_offset - physical_offset % SMALL_SEGMENT_BYTES
    return store_dir / "commitlog" / f"{start:020d}", physical_offset - start


def _damage(store_dir: Path, physical_offset: int, data: bytes) -> None:
    path, position = _segment_path(store_dir, physical_offset)
    with path.open("r+b") as file:
        file.seek(position)
        file.write(data)


def _assert_recovers_to(store_dir: Path, results: list[PutResult], valid_count: int, *,
                        crashed: bool = True, offsets_lost: int = 0) -> MessageStore:
    """Open and check the first `valid_count` records are what is left; `offsets_lost`
    queue offsets of lost records the writer had counted as synced are not reused."""
    if crashed:
        (store_dir / "abort").touch()
    store = MessageStore.open(store_dir, small_config())
    bodies = [m.body for m in store.iter_messages()]
    assert bodies == [bytes([i % 256]) * 700 for i in range(valid_count)]
    last = results[valid_count - 1]
    assert store.written_position == last.physical_offset + last.size_bytes
    following = store.put(Message("R", valid_count % 3, b"after"))
    assert following.physical_offset == store.written_position - following.size_bytes
    assert following.queue_offset == len([i for i in range(valid_count)
                                          if i % 3 == valid_count % 3]) + offsets_lost
    return store


def test_torn_record_at_the_tail(store_dir: Path) -> None:
    results = _fill(store_dir, 200)
    torn = results[-1]
    _damage(store_dir, torn.physical_offset + 100, bytes(torn.size_bytes - 100))
    store = _assert_recovers_to(store_dir, results, 199, offsets_lost=1)
    assert store.recovery_report.mode is RecoveryMode.ABNORMAL
    assert f"position {torn.physical_offset}" in store.recovery_report.first_invalid_reason
    assert store.recovery_report.truncated_bytes == 100  # the torn record's surviving bytes
    # The checkpoint recorded that record as synced (the store closed cleanly before the
    # bytes were torn): losing it is reported, not taken for an unsynced tail, and its queue
    # offset is not given to another message: it answers MESSAGE_CORRUPT.
    assert [d.position for d in store.recovery_report.damage] == [torn.physical_offset]
    _wait_dispatched(store)
    with store.get("R", 199 % 3, torn.queue_offset, 1) as pulled:
        assert pulled.status is GetStatus.MESSAGE_CORRUPT, pulled
    store.close()


def test_garbage_after_the_tail(store_dir: Path) -> None:
    results = _fill(store_dir, 150)
    end = results[-1].physical_offset + results[-1].size_bytes
    _damage(store_dir, end, b"\xde\xad\xbe\xef" * 64)
    store = _assert_recovers_to(store_dir, results, 150)
    assert store.recovery_report.truncated_bytes == 256
    assert "bad magic" in store.recovery_report.first_invalid_reason
    assert store.recovery_report.damage == [], "past the durable end: a tail, not damage"
    store.close()
    reopened = MessageStore.open(store_dir, small_config())  # the garbage is gone for good
    assert reopened.recovery_report.truncated_bytes == 0
    reopened.close()


def test_zeroed_page_inside_the_last_segment_is_skipped_not_cut(store_dir: Path) -> None:
    results = _fill(store_dir, 300)
    last_segment_start = results[-1].physical_offset // SMALL_SEGMENT_BYTES * SMALL_SEGMENT_BYTES
    page_start = last_segment_start + 8192
    _damage(store_dir, page_start, bytes(4096))
    hit = [i for i, r in enumerate(results)
           if r.physical_offset < page_start + 4096 and
           r.physical_offset + r.size_bytes > page_start]
    assert hit
    (store_dir / "abort").touch()
    store = MessageStore.open(store_dir, small_config())
    report = store.recovery_report
    assert report.truncated_bytes == 0
    assert len(report.damage) == 1 and report.damage[0].position <= page_start
    kept = [m.body for m in store.iter_messages(report.damage[0].end_position)]
    assert kept == [bytes([i % 256]) * 700 for i in range(hit[-1] + 1, 300)]
    _wait_dispatched(store)
    for i in hit:  # each lost record answers MESSAGE_CORRUPT at its queue offset
        with store.get("R", i % 3, results[i].queue_offset, 1) as pulled:
            assert pulled.status is GetStatus.MESSAGE_CORRUPT, pulled
            assert pulled.next_offset == results[i].queue_offset + 1
    following = store.put(Message("R", 0, b"after"))
    assert following.queue_offset == len([i for i in range(300) if i % 3 == 0])
    store.close()


@pytest.mark.parametrize("damage", ["missing", "corrupt", "torn-write"])
def test_missing_or_corrupt_checkpoint_verifies_everything(store_dir: Path,
                                                          damage: str) -> None:
    results = _fill(store_dir, 300)
    checkpoint = store_dir / "checkpoint"
    if damage == "missing":
        checkpoint.unlink()
    elif damage == "corrupt":
        checkpoint.write_bytes(b"\xff" * 4096)
    else:
        data = bytearray(checkpoint.read_bytes())
        data[3] ^= 0x40  # a field rewritten after mqstore's last write: RocketMQ's, or torn
        checkpoint.write_bytes(bytes(data))
    first = results[0]
    _damage(store_dir, first.physical_offset + 95, b"\x00\x01")  # a flipped body byte
    store = MessageStore.open(store_dir, small_config())
    report = store.recovery_report
    if damage == "torn-write":  # whole fields, trusted as RocketMQ's: a normal open
        assert report.mode is RecoveryMode.NORMAL
    else:
        assert report.mode is RecoveryMode.FULL
        assert report.verify_from_segment == 0
        assert [d.position for d in report.damage] == [first.physical_offset]
        assert report.truncated_bytes == 0
    bodies = [m.body for m in store.iter_messages(results[1].physical_offset)]
    assert bodies == [bytes([i % 256]) * 700 for i in range(1, 300)], "nothing after is lost"
    with pytest.raises(CorruptRecordError):
        store.message_at(first.physical_offset)
    store.close()


def test_decision_table_covers_every_case(store_dir: Path) -> None:
    _fill(store_dir, 300)
    store = MessageStore.open(store_dir, small_config())
    segments = store._segment_list.segments
    newest_first_record = store.message_at(segments[-1].start_position)
    cases = itertools.product([False, True], [False, True], list(CheckpointState))
    for has_segments, abort_present, state in cases:
        values = CheckpointValues(newest_first_record.store_timestamp_ms + 3000,
                                  newest_first_record.store_timestamp_ms + 3000)
        report = plan_recovery(segments if has_segments else [], abort_present=abort_present,
                               checkpoint_state=state, checkpoint=values,
                               recovery_segments_max=2)
        if not has_segments:
            assert report.mode is RecoveryMode.EMPTY
        elif state in (CheckpointState.MISSING, CheckpointState.CORRUPT):
            assert (report.mode, report.verify_from_segment) == (RecoveryMode.FULL, 0)
        elif not abort_present:
            assert report.mode is RecoveryMode.NORMAL
            assert report.verify_from_segment == len(segments) - 2
        else:
            assert report.mode is RecoveryMode.ABNORMAL
            assert report.verify_from_segment == len(segments) - 1
    store.close()


def test_abnormal_recovery_falls_back_to_the_first_segment(store_dir: Path) -> None:
    _fill(store_dir, 300)
    (store_dir / "checkpoint").write_bytes(encode_checkpoint(CheckpointValues(1, 1)))
    (store_dir / "abort").touch()
    with MessageStore.open(store_dir, small_config()) as store:
        assert store.recovery_report.mode is RecoveryMode.ABNORMAL
        assert store.recovery_report.verify_from_segment == 0


def test_clean_reopen_truncates_nothing(store_dir: Path) -> None:
    results = _fill(store_dir, 120)
    store = _assert_recovers_to(store_dir, results, 120, crashed=False)
    assert store.recovery_report.mode is RecoveryMode.NORMAL
    assert store.recovery_report.truncated_bytes == 0
    store.close()


def test_second_writer_in_the_same_process_is_refused(store_dir: Path) -> None:
    with MessageStore.open(store_dir, small_config()), \
            pytest.raises(StoreLockedError, match="already has the store open"):
        MessageStore.open(store_dir, small_config())


def test_second_writer_in_another_process_is_refused(store_dir: Path) -> None:
    with MessageStore.open(store_dir, small_config()):
        code = ("import sys\nfrom mqstore.storage import MessageStore, StoreLockedError\n"
                "from tests.conftest import small_config\n"
                "try:\n    MessageStore.open(sys.argv[1], small_config())\n"
                "except StoreLockedError as e:\n    print(e); sys.exit(3)\n")
        outcome = subprocess.run([sys.executable, "-c", code, str(store_dir)],
                                 check=False, capture_output=True, text=True, timeout=60,
                                 cwd=Path(__file__).parents[3])
    assert outcome.returncode == 3, outcome.stderr
    assert "another writer holds the store lock" in outcome.stdout
    assert "pid=" in outcome.stdout


def test_segments_written_with_another_size_are_refused_naming_the_setting(
        store_dir: Path) -> None:
    _fill(store_dir, 10)
    with pytest.raises(StoreFormatError, match="segment_size_bytes is 32768"):
        MessageStore.open(store_dir, StoreConfig.for_small_segments(SMALL_SEGMENT_BYTES // 2))


def test_a_short_segment_is_extended_and_reported_not_refused(store_dir: Path) -> None:
    """A power loss (or a cut) left the segment short: zeros where its records were are
    damage, reported; the store opens."""
    _fill(store_dir, 10)
    segment = store_dir / "commitlog" / f"{0:020d}"
    with segment.open("r+b") as file:
        file.truncate(4096)
    with MessageStore.open(store_dir, small_config()) as store:
        assert segment.stat().st_size == SMALL_SEGMENT_BYTES
        reasons = [damage.reason for damage in store.recovery_report.damage]
        assert any("was 4096 bytes long" in reason for reason in reasons), reasons


def test_checkpoint_has_rocketmq_layout(store_dir: Path) -> None:
    _fill(store_dir, 20)
    data = (store_dir / "checkpoint").read_bytes()
    assert len(data) == 4096
    physic, logics, index, flushed = struct.unpack_from(">qqqq", data, 0)
    assert physic > 0
    assert 0 < logics <= physic  # the consume queues' time: what dispatch synced
    assert 0 < index <= physic
    assert flushed > 0


def _wait_dispatched(store: MessageStore) -> None:
    deadline = time.monotonic() + 5
    while store.dispatch_behind_bytes and time.monotonic() < deadline:
        time.sleep(0.002)
    assert store.dispatch_behind_bytes == 0


def _queue_bodies(store: MessageStore, topic: str, queue_id: int) -> list[bytes]:
    bodies: list[bytes] = []
    offset = store.min_offset(topic, queue_id)
    while True:
        with store.get(topic, queue_id, offset, 32) as result:
            if not result.messages:
                return bodies
            bodies.extend(bytes(m.body) for m in result.messages)
            offset = result.next_offset


def test_a_damaged_record_in_the_middle_answers_corrupt_and_keeps_the_rest(
        store_dir: Path) -> None:
    results = _fill(store_dir, 200)  # consume queues were built to the end
    damaged = results[150]
    _damage(store_dir, damaged.physical_offset + 90, b"\xff\xff")  # its body CRC fails
    store = MessageStore.open(store_dir, small_config())
    assert [d.position for d in store.recovery_report.damage] == [damaged.physical_offset]
    _wait_dispatched(store)
    for queue_id in range(3):
        assert store.max_offset("R", queue_id) == len([i for i in range(200) if i % 3 == queue_id])
    with store.get("R", 0, damaged.queue_offset - 2, 32) as pulled:  # served up to it
        assert pulled.status is GetStatus.FOUND
        assert pulled.next_offset == damaged.queue_offset
    with store.get("R", 0, damaged.queue_offset, 32) as pulled:
        assert pulled.status is GetStatus.MESSAGE_CORRUPT
        assert "CRC" in pulled.reason
        assert pulled.next_offset == damaged.queue_offset + 1
    with store.get("R", 0, damaged.queue_offset + 1, 32) as pulled:
        assert [bytes(m.body) for m in pulled.messages] == [
            bytes([i % 256]) * 700 for i in range(153, 200, 3)]
    after = store.put(Message("R", 0, b"after"))
    assert after.queue_offset == len([i for i in range(200) if i % 3 == 0])
    store.close()


@pytest.mark.parametrize("lost", ["consumequeue", "index"])
def test_lost_queues_or_index_are_rebuilt_from_the_log(store_dir: Path, lost: str) -> None:
    _fill(store_dir, 200)
    shutil.rmtree(store_dir / lost)
    store = MessageStore.open(store_dir, small_config())
    _wait_dispatched(store)
    for queue_id in range(3):
        expected = [bytes([i % 256]) * 700 for i in range(200) if i % 3 == queue_id]
        assert _queue_bodies(store, "R", queue_id) == expected
    found = store.query_by_key("R", "k17")
    assert [m.body for m in found] == [bytes([17]) * 700]
    assert store.next_queue_offset("R", 1) == len([i for i in range(200) if i % 3 == 1])
    store.close()


def test_the_checkpoint_is_current_while_the_store_runs(store_dir: Path) -> None:
    """What a kill -9 or a power loss would leave: a fresh async store writes its checkpoint
    at open, and the queues' and the index's times reach it at the first queue sync, not
    only at the first thorough one (`queue_flush_thorough_interval_ms`, 60 s)."""
    config = small_config(flush_interval_ms=20, flush_pages_min=0, queue_flush_interval_ms=20,
                          checkpoint_interval_ms=20)
    assert config.queue_flush_thorough_interval_ms == 60_000
    with MessageStore.open(store_dir, config) as store:
        values, state = read_checkpoint(store_dir / "checkpoint")
        assert state is CheckpointState.VALID, "written at open"
        results = store.put_batch([Message("C", 0, b"c", keys=(f"k{i}",)) for i in range(50)])
        last_ms = results[-1].store_timestamp_ms
        deadline = time.monotonic() + 10
        while True:
            values, state = read_checkpoint(store_dir / "checkpoint")
            if min(values.physic_msg_timestamp_ms, values.logics_msg_timestamp_ms,
                   values.index_msg_timestamp_ms) >= last_ms:
                break
            assert time.monotonic() < deadline, values
            time.sleep(0.01)
        assert state is CheckpointState.VALID
        assert values.master_flushed_offset == store.written_position
