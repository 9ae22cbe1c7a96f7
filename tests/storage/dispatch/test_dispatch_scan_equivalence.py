"""Dispatch with the C record walk against dispatch with its Python reference
(storage/format/dispatch_scan.py): the same commit log, damaged the same way, dispatched in
passes of random sizes with each -- byte-identical consume queue and index files, the same
notices, the same damage, holes and counters.

The log holds what dispatch treats differently: tags, keys and unique keys (index entries),
delayed messages (their entry's due time), prepared and rolled-back transaction records (no
entry), batches, and damaged records (skipped; their queues get damaged entries).
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore, StoreConfig
from mqstore.storage.dispatch import dispatcher as dispatcher_module
from mqstore.storage.dispatch.dispatcher import Dispatcher
from mqstore.storage.format import dispatch_scan, volume
from mqstore.storage.format.record import SysFlag
from mqstore.storage.index.index_service import IndexService
from mqstore.storage.log.reader import CommitLogReader
from mqstore.storage.queues.consume_queues import ConsumeQueues

SEGMENT_BYTES = 64 * 1024
CONFIG = StoreConfig.for_small_segments(SEGMENT_BYTES, dispatch_enabled=False,
                                        index_count_max=200)


def _message(rng: random.Random, number: int) -> Message:
    kind = rng.choice(["plain", "tags", "keys", "unique", "delay", "prepared", "rollback"])
    topic = rng.choice(["TopicA", "TopicB", "Other"])
    queue_id = rng.randrange(3)
    body = bytes(rng.randrange(300))
    if kind == "tags":
        return Message(topic, queue_id, body, tags=rng.choice(["TagA", "TagB", "é"]))
    if kind == "keys":
        return Message(topic, queue_id, body, keys=[f"k{number}", "shared"], tags="TagA")
    if kind == "unique":
        return Message(topic, queue_id, body, properties={"UNIQ_KEY": f"U{number:08X}"})
    if kind == "delay":
        return Message(topic, queue_id, body, properties={"DELAY": str(rng.randrange(1, 5))})
    if kind in ("prepared", "rollback"):
        flag = SysFlag.TRANSACTION_PREPARED if kind == "prepared" else \
            SysFlag.TRANSACTION_ROLLBACK
        return Message(topic, queue_id, body, sysflag=int(flag))
    return Message(topic, queue_id, body)


def _write_log(directory: Path, rng: random.Random) -> tuple[int, list[int]]:
    """The log's end and the positions of its records."""
    store = MessageStore.open(directory, CONFIG)
    positions: list[int] = []
    end = 0
    try:
        for number in range(rng.randrange(150, 400)):
            if rng.random() < 0.1:
                batch = [Message("TopicA", 0, bytes(rng.randrange(50))) for _ in range(5)]
                results = store.put_batch(batch)
            else:
                results = [store.put(_message(rng, number))]
            for result in results:
                assert result.ok, result.reason
                positions.append(result.physical_offset)
                end = max(end, result.physical_offset + result.size_bytes)
    finally:
        store.close()
    return end, positions


def _damage(directory: Path, positions: list[int], rng: random.Random) -> None:
    for position in rng.sample(positions[1:], k=min(3, len(positions) - 1)):
        start = position // SEGMENT_BYTES * SEGMENT_BYTES
        segment = directory / volume.COMMITLOG_DIRECTORY / f"{start:020d}"
        with segment.open("r+b") as file:
            file.seek(position % SEGMENT_BYTES + rng.choice([4, 28, 84]))
            file.write(bytes([rng.randrange(256)]))


def _dispatch(directory: Path, end: int, passes: list[int]) -> tuple[object, ...]:
    reader = CommitLogReader(directory / volume.COMMITLOG_DIRECTORY,
                             segment_size_bytes=SEGMENT_BYTES)
    queues = ConsumeQueues(directory, file_size_bytes=CONFIG.consume_queue_file_size_bytes,
                           allocate_step_bytes=CONFIG.consume_queue_allocate_step_bytes)
    index = IndexService(directory=directory / volume.INDEX_DIRECTORY,
                         hash_slot_count=CONFIG.index_hash_slot_count,
                         index_count_max=CONFIG.index_count_max,
                         query_results_max=CONFIG.index_query_results_max)
    queues.load()
    index.load(abnormal=False, index_timestamp_ms=0)
    notices = []
    try:
        dispatcher = Dispatcher(reader, queues, index=index, dispatched_position=0,
                                records_per_pass_max=passes[0], index_tags=True)
        for budget in passes * 1000:
            dispatcher.records_per_pass_max = budget
            notices.append(dict(dispatcher.dispatch(committed_position=end, min_position=0)))
            if dispatcher.caught_up:
                break
        state = (dispatcher.dispatched_position, list(dispatcher.damage),
                 dispatcher.damaged_ranges_total, dispatcher.queue_holes_total,
                 dispatcher.records_dispatched_total, dispatcher.last_store_timestamp_ms,
                 dispatcher.index_timestamp_ms, dict(dispatcher.stalled_queues), notices)
    finally:
        index.close()
        queues.close()
        reader.close()
    return state


def _files(directory: Path) -> dict[str, bytes]:
    """Queue files by path, index files in creation order (their names are clock times)."""
    queue_files = {str(path.relative_to(directory)): path.read_bytes()
                   for path in sorted((directory / volume.CONSUME_QUEUE_DIRECTORY).rglob("*"))
                   if path.is_file()}
    index_files = sorted((directory / volume.INDEX_DIRECTORY).iterdir())
    return queue_files | {f"index #{number}": path.read_bytes()
                          for number, path in enumerate(index_files)}


@pytest.mark.parametrize("seed", range(6))
def test_c_walk_dispatches_byte_for_byte_as_the_reference(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    written = tmp_path / "written"
    end, positions = _write_log(written, rng)
    if seed % 2:
        _damage(written, positions, rng)
    passes = [rng.choice([1, 2, 7, 64, 10_000]) for _ in range(4)]
    outcomes = []
    for name, scan in (("c", dispatch_scan.compiled_scan_records()),
                       ("reference", dispatch_scan.scan_records_reference)):
        directory = tmp_path / name
        shutil.copytree(written / volume.COMMITLOG_DIRECTORY,
                        directory / volume.COMMITLOG_DIRECTORY)
        monkeypatch.setattr(dispatcher_module, "scan_records", scan)
        outcomes.append((_dispatch(directory, end, passes), _files(directory)))
    (c_state, c_files), (reference_state, reference_files) = outcomes
    assert c_state == reference_state
    assert c_files.keys() == reference_files.keys()
    for name, content in c_files.items():
        assert content == reference_files[name], name
    assert c_state[4] > 0  # records were dispatched
    assert any(name.startswith("index") for name in c_files)
