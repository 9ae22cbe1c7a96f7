"""The race API (storage/race/store.py): `append` offsets under concurrency, `get_range` bounds and
contents, read-your-writes with dispatch lagging, and durability across kill -9."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from mqstore.storage import (
    AppendError,
    FlushMode,
    PutStatus,
    RangeReadTimeoutError,
    StoreConfig,
    StoreError,
)
from mqstore.storage.format.padding import PADDING_TOPIC
from mqstore.storage.race import RaceStore
from mqstore.storage.recovery.scrub import verify_store
from tests.conftest import small_config
from tests.processes import module_command
from tests.storage.race.race_writer import QUEUES, TOPIC, body_for, race_config

REPO = Path(__file__).parents[3]


def sync_config(**overrides: object) -> StoreConfig:
    return small_config(flush_mode=FlushMode.SYNC, **overrides)


@pytest.mark.parametrize(("align", "pool"), [(0, False), (4096, False), (4096, True)])
def test_concurrent_appends_number_each_queue_without_gaps(store_dir: Path, align: int,
                                                           pool: bool) -> None:
    threads, per_thread, queues = 8, 40, 3
    appended: dict[tuple[str, int], dict[int, bytes]] = {}
    lock = threading.Lock()
    rng = random.Random(3)
    payloads = [rng.randbytes(rng.randint(100, 3000)) for _ in range(threads * per_thread)]
    config = sync_config(group_commit_align_bytes=align, pool_enabled=pool)
    with RaceStore.open(store_dir, config) as store:

        def produce(producer: int) -> None:
            for sequence in range(per_thread):
                key = (f"T{sequence % 2}", (producer + sequence) % queues)
                data = payloads[producer * per_thread + sequence]
                offset = store.append(key[0], key[1], data)
                with lock:
                    assert offset not in appended.setdefault(key, {}), "offset given twice"
                    appended[key][offset] = data

        workers = [threading.Thread(target=produce, args=(p,)) for p in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert sum(len(by_offset) for by_offset in appended.values()) == threads * per_thread
        for (topic, queue_id), by_offset in appended.items():
            assert sorted(by_offset) == list(range(len(by_offset))), "a gap in the offsets"
            read = store.get_range(topic, queue_id, 0, len(by_offset) + 5)
            assert read == dict(enumerate(by_offset[o] for o in range(len(by_offset))))


def test_get_range_keys_are_relative_and_stop_at_the_end(store_dir: Path) -> None:
    with RaceStore.open(store_dir, sync_config()) as store:
        bodies = [f"body-{i}".encode() * (i + 1) for i in range(25)]
        assert [store.append("T", 2, body) for body in bodies] == list(range(25))
        middle = store.get_range("T", 2, 10, 5)
        assert list(middle) == [0, 1, 2, 3, 4]
        assert list(middle.values()) == bodies[10:15]
        assert store.get_range("T", 2, 22, 10) == {0: bodies[22], 1: bodies[23], 2: bodies[24]}
        assert store.get_range("T", 2, 25, 10) == {}
        assert store.get_range("T", 2, 1000, 10) == {}
        assert store.get_range("T", 2, 0, 0) == {}
        assert store.get_range("T", 3, 0, 10) == {}
        assert store.get_range("Unknown", 0, 0, 10) == {}
        everything = store.get_range("T", 2, 0, 100)  # more than one `get` transfers (32)
        assert list(everything.values()) == bodies
        assert all(type(body) is bytes for body in everything.values())


def test_get_range_rejects_bad_arguments(store_dir: Path) -> None:
    with RaceStore.open(store_dir, small_config()) as store:
        with pytest.raises(ValueError, match="offset=-1 must not be negative"):
            store.get_range("T", 0, -1, 10)
        with pytest.raises(ValueError, match="fetch_num=-5 must not be negative"):
            store.get_range("T", 0, 0, -5)
        with pytest.raises(ValueError, match="must be an int"):
            store.get_range("T", 0, True, 5)
        with pytest.raises(ValueError, match="must be an int"):
            store.get_range("T", 0, 0, 2.5)  # type: ignore[arg-type]


def test_append_needs_sync_flush(store_dir: Path) -> None:
    with RaceStore.open(store_dir, small_config()) as race:
        assert not race.store.config.flush_sync
        with pytest.raises(StoreError, match=r"flush_mode=FlushMode\.SYNC"):
            race.append("T", 0, b"data")
        assert race.store.next_queue_offset("T", 0) == 0, "nothing may be written"


def test_append_failure_carries_status_and_reason(store_dir: Path) -> None:
    config = sync_config()
    with RaceStore.open(store_dir, config) as store:
        too_large = bytes(store.store.config.message_body_size_bytes_max + 1)
        with pytest.raises(AppendError, match="MESSAGE_ILLEGAL") as raised:
            store.append("T", 0, too_large)
        assert raised.value.status is PutStatus.MESSAGE_ILLEGAL
        assert "message_body_size_bytes_max" in raised.value.reason
        with pytest.raises(AppendError, match="reserved") as raised:
            store.append(PADDING_TOPIC, 0, b"mine")
        assert raised.value.status is PutStatus.MESSAGE_ILLEGAL
        assert store.append("T", 0, b"fine") == 0
    with RaceStore.open(store_dir, config) as store:
        store.close()
        with pytest.raises(AppendError, match=r"SERVICE_NOT_AVAILABLE.*closed"):
            store.append("T", 0, b"late")


def test_read_your_writes_while_dispatch_sleeps(store_dir: Path) -> None:
    """Dispatch polls once a minute here and nothing but `get_range` wakes it: what append
    returned is still not in the consume queue, and get_range must wait for it."""
    config = sync_config(dispatch_interval_ms=60_000)
    with RaceStore.open(store_dir, config) as store:
        for round_number in range(5):
            time.sleep(0.05)  # let dispatch finish its last pass and go to sleep
            data = f"round {round_number}".encode()
            offset = store.append("T", 0, data)
            assert store.store.max_offset("T", 0) == offset, "dispatch was not behind"
            assert store.store.dispatch_behind_bytes > 0
            assert store.get_range("T", 0, offset, 10) == {0: data}


def test_get_range_times_out_when_dispatch_never_comes(store_dir: Path) -> None:
    config = sync_config(dispatch_interval_ms=60_000, range_read_wait_ms=50)
    with RaceStore.open(store_dir, config) as store:
        time.sleep(0.05)
        store._wake_dispatch = lambda: None  # a dispatch stalled for good
        store.append("T", 0, b"never dispatched")
        started = time.monotonic()
        with pytest.raises(RangeReadTimeoutError, match="range_read_wait_ms"):
            store.get_range("T", 0, 0, 1)
        assert time.monotonic() - started >= 0.05


def test_get_range_needs_in_process_dispatch(store_dir: Path) -> None:
    with RaceStore.open(store_dir, sync_config(dispatch_enabled=False)) as store:
        store.append("T", 0, b"x")
        with pytest.raises(StoreError, match="dispatch_enabled=false"):
            store.get_range("T", 0, 0, 1)


def test_user_listener_still_gets_notices(store_dir: Path) -> None:
    seen: list[dict[tuple[str, int], int]] = []
    with RaceStore.open(store_dir, sync_config(),
                        listener=lambda notices: seen.append(dict(notices))) as store:
        store.append("T", 4, b"x")
        assert store.get_range("T", 4, 0, 1) == {0: b"x"}
    assert any(notices.get(("T", 4)) == 1 for notices in seen)


# -- durability: kill -9 of an appending process -------------------------------------------

def _append_and_kill(store_dir: Path, run: int, rng: random.Random) -> list[tuple[int, ...]]:
    process = subprocess.Popen([*module_command("tests.storage.race.race_writer"),
                                str(store_dir), str(run)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert process.stdout is not None
    ready = process.stdout.readline()
    assert ready == b"ready\n", process.stderr.read().decode() if process.stderr else ""
    first = process.stdout.readline()  # kill only after an ack: a loaded machine is slow
    time.sleep(rng.uniform(0.05, 0.3))
    os.kill(process.pid, signal.SIGKILL)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL
    return [tuple(int(field) for field in line.split())
            for line in (first + output).decode().splitlines(keepends=True)
            if line.endswith("\n")]


def test_appended_data_survives_kill9_with_aligned_groups(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    rng = random.Random(20261122)
    acked: dict[tuple[int, int], bytes] = {}
    for run in range(6):
        lines = _append_and_kill(store_dir, run, rng)
        assert lines, f"round {run} acknowledged nothing before the kill"
        for acked_run, producer, sequence, queue_id, offset in lines:
            assert (queue_id, offset) not in acked, "an acknowledged offset was reused"
            acked[queue_id, offset] = body_for(acked_run, producer, sequence)
        with RaceStore.open(store_dir, race_config()) as store:
            for queue_id in range(QUEUES):
                read = store.get_range(TOPIC, queue_id, 0, 1 << 20)
                assert store.store.max_offset(TOPIC, queue_id) == len(read)
                for (acked_queue, offset), body in acked.items():
                    if acked_queue == queue_id:
                        assert read[offset] == body, (queue_id, offset)
            assert store.store.next_queue_offset(PADDING_TOPIC, 0) == 0
            messages = sum(1 for _ in store.store.iter_messages())
            assert messages == sum(store.store.max_offset(TOPIC, q) for q in range(QUEUES))
        summaries, corruptions = verify_store(store_dir)  # recovered, closed cleanly
        assert not corruptions, corruptions
        records = sum(summary.record_count for summary in summaries)
        assert records > messages, "no filler record was written: alignment untested"
    assert not (store_dir / "consumequeue" / PADDING_TOPIC).exists()
