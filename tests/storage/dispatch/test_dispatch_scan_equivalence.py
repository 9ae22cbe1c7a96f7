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
from mqstore.storage.format import dispatch_scan, volume
from mqstore.storage.format.record import SysFlag
from tests.storage.dispatch.dispatch_helpers import damage, dispatch, store_files

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


@pytest.mark.parametrize("seed", range(6))
def test_c_walk_dispatches_byte_for_byte_as_the_reference(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    written = tmp_path / "written"
    end, positions = _write_log(written, rng)
    if seed % 2:
        damage(written, positions, rng, segment_bytes=SEGMENT_BYTES)
    passes = [rng.choice([1, 2, 7, 64, 10_000]) for _ in range(4)]
    outcomes = []
    for name, scan in (("c", dispatch_scan.compiled_scan_records()),
                       ("reference", dispatch_scan.scan_records_reference)):
        directory = tmp_path / name
        shutil.copytree(written / volume.COMMITLOG_DIRECTORY,
                        directory / volume.COMMITLOG_DIRECTORY)
        monkeypatch.setattr(dispatcher_module, "scan_records", scan)
        outcomes.append((dispatch(directory, CONFIG, end, passes), store_files(directory)))
    (c_state, c_files), (reference_state, reference_files) = outcomes
    assert c_state == reference_state
    assert c_files.keys() == reference_files.keys()
    for name, content in c_files.items():
        assert content == reference_files[name], name
    assert c_state[4] > 0  # records were dispatched
    assert any(name.startswith("index") for name in c_files)
