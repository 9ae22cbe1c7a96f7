"""The damage matrix: every kind of damage × (clean close, crash) × (embedded, split).

A child process writes a corpus under sync flush (damage_corpus.py: every message it reports
was PUT_OK, so synced) and closes or crashes.  The damage is then made to the files, `verify`
must report it, and the store opens again (the default policy, SKIP).  For every case:

Recovery reports the damage it meets (it CRC-checks only its window of recent segments, as
RocketMQ does); a read reports what it meets, and `verify` all of it.

* no acknowledged message is deleted: every one the damage did not touch reads back the same,
  by queue offset (`get`), by position (`message_at`) and by key;
* a message the damage touched is never served: `get` at its offset answers MESSAGE_CORRUPT
  (then moves past it), `message_at` raises;
* the next put takes a queue offset no message had (offsets are never reused).

The tails (a torn record or garbage after the last message) are bytes no put acknowledged:
they are cut, and touch no message.  Damage to the consume queues or the index (derived
files) loses nothing: they are built again from the log.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqstore.storage import (
    CorruptionPolicy,
    GetResult,
    GetStatus,
    Message,
    MessageStore,
    NoRecordError,
    StoreCorruptError,
    StoreFormatError,
)
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.reads.store_view import StoreView
from mqstore.storage.recovery.scrub import verify_store
from tests.conftest import SMALL_SEGMENT_BYTES, small_config
from tests.processes import REPO, module_command
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config
from tests.storage.recovery.damage_corpus import MESSAGES, TOPICS, body_for


@dataclass(frozen=True)
class Acked:
    number: int
    position: int
    size: int
    queue_offset: int

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def key(self) -> tuple[str, int]:
        return TOPICS[self.number % 2], self.number % 3


def _write_corpus(directory: Path, mode: str, ending: str) -> list[Acked]:
    done = subprocess.run([*module_command("tests.storage.recovery.damage_corpus"),
                           str(directory), mode, ending], capture_output=True, text=True,
                          timeout=120, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "done", done.stdout[-500:]
    return [Acked(**json.loads(line)) for line in lines[:-1]]


def _segment(directory: Path, position: int) -> tuple[Path, int]:
    start = position - position % SMALL_SEGMENT_BYTES
    return directory / "commitlog" / f"{start:020d}", position - start


def _overwrite(directory: Path, position: int, data: bytes) -> None:
    path, at = _segment(directory, position)
    with path.open("r+b") as file:
        file.seek(at)
        file.write(data)


def _in_segment(acked: list[Acked], number: int) -> list[Acked]:
    start = acked[-1].position - acked[-1].position % SMALL_SEGMENT_BYTES
    return [a for a in acked if a.position // SMALL_SEGMENT_BYTES ==
            (start if number < 0 else number * SMALL_SEGMENT_BYTES) // SMALL_SEGMENT_BYTES]


def _flip_body_byte(directory: Path, acked: list[Acked], segment: int) -> set[int]:
    victim = _in_segment(acked, segment)[len(_in_segment(acked, segment)) // 2]
    _overwrite(directory, victim.position + victim.size - 60, b"\xa5")  # inside the body
    return {victim.number}


def _zero_page(directory: Path, acked: list[Acked], segment: int) -> set[int]:
    records = _in_segment(acked, segment)
    start = records[len(records) // 3].position
    page = start - start % 4096 + 4096
    assert page + 4096 < records[-1].position, "the page must lie between records"
    _overwrite(directory, page, bytes(4096))
    return {a.number for a in records if a.position < page + 4096 and a.end > page}


def _bad_size(directory: Path, acked: list[Acked], segment: int) -> set[int]:
    victim = _in_segment(acked, segment)[5]
    _overwrite(directory, victim.position, (victim.size + 13).to_bytes(4, "big"))
    return {victim.number}


def _torn_tail(directory: Path, acked: list[Acked], _segment_number: int) -> set[int]:
    last = acked[-1]
    path, at = _segment(directory, last.position)
    with path.open("r+b") as file:  # a put in flight: part of a copy of the last record
        file.seek(at)
        head = file.read(last.size)
        file.seek(at + last.size)
        file.write(head[:70])
    return set()


def _garbage_tail(directory: Path, acked: list[Acked], _segment_number: int) -> set[int]:
    _overwrite(directory, acked[-1].end, b"\xde\xad\xbe\xef" * 64)
    return set()


def _truncated_segment(directory: Path, acked: list[Acked], segment: int) -> set[int]:
    path = directory / "commitlog" / f"{segment * SMALL_SEGMENT_BYTES:020d}"
    keep = SMALL_SEGMENT_BYTES // 2
    with path.open("r+b") as file:
        file.truncate(keep)
    return {a.number for a in _in_segment(acked, segment)
            if a.end > segment * SMALL_SEGMENT_BYTES + keep}


def _missing_segment(directory: Path, acked: list[Acked], segment: int) -> set[int]:
    (directory / "commitlog" / f"{segment * SMALL_SEGMENT_BYTES:020d}").unlink()
    return {a.number for a in _in_segment(acked, segment)}


def _bad_checkpoint(directory: Path, _acked: list[Acked], _segment_number: int) -> set[int]:
    (directory / "checkpoint").write_bytes(b"\xff" * 4096)
    return set()


def _deleted(name: str) -> Callable[[Path, list[Acked], int], set[int]]:
    def delete(directory: Path, _acked: list[Acked], _segment_number: int) -> set[int]:
        shutil.rmtree(directory / name)
        return set()

    return delete


def _garbled_queue(directory: Path, _acked: list[Acked], _segment_number: int) -> set[int]:
    queue_file = sorted((directory / "consumequeue" / "Red" / "1").iterdir())[0]
    with queue_file.open("r+b") as file:
        file.seek(20 * 10)
        file.write(b"\x80garbage!" * 20)
    return set()


def _garbled_index(directory: Path, _acked: list[Acked], _segment_number: int) -> set[int]:
    index_file = sorted((directory / "index").iterdir())[0]
    with index_file.open("r+b") as file:
        file.seek(16)
        file.write(b"\x7f" * 24)  # begin/end offsets and the counts
    return set()


DamageMaker = Callable[[Path, list[Acked], int], set[int]]
KINDS: dict[str, tuple[DamageMaker, int, bool]] = {
    # name: (make it, in which segment (-1: the last holding data), verify must report it)
    "torn-tail": (_torn_tail, -1, True),
    "garbage-tail": (_garbage_tail, -1, True),
    "flipped-byte-last": (_flip_body_byte, -1, True),
    "flipped-byte-old": (_flip_body_byte, 0, True),
    "zeroed-page-last": (_zero_page, -1, True),
    "zeroed-page-old": (_zero_page, 1, True),
    "bad-size-old": (_bad_size, 0, True),
    "truncated-segment": (_truncated_segment, 2, True),
    "missing-segment": (_missing_segment, 3, True),
    "bad-checkpoint": (_bad_checkpoint, 0, True),
    "deleted-queues": (_deleted("consumequeue"), 0, False),
    "garbled-queue": (_garbled_queue, 0, True),
    "deleted-index": (_deleted("index"), 0, False),
    "garbled-index": (_garbled_index, 0, True),
}


class Reader:
    """The reads of one reopened store: a MessageStore, or a writer, an indexer and a view."""

    def __init__(self, directory: Path, mode: str) -> None:
        self.mode = mode
        self.indexer: Indexer | None = None
        self.view: StoreView | None = None
        if mode == "embedded":
            self.store = MessageStore.open(directory, small_config())
            assert self.store.wait_dispatched(timeout_ms=30_000)
        else:
            self.store = MessageStore.open(directory, writer_config())
            self.indexer = Indexer.open(directory, indexer_config())
            wait_dispatched(self.indexer, self.store.committed_position)
            self.indexer.sync(thorough=True)
            self.view = StoreView.open(directory, indexer_config())
            self.view.refresh()

    def get(self, topic: str, queue_id: int, offset: int) -> GetResult:
        reads = self.view if self.view is not None else self.store
        return reads.get(topic, queue_id, offset, 1)

    def by_key(self, topic: str, key: str) -> list[bytes]:
        reads = self.view if self.view is not None else self.store
        return [bytes(m.body) for m in reads.query_by_key(topic, key)]

    def close(self) -> None:
        for opened in (self.view, self.indexer, self.store):
            if opened is not None:
                opened.close()


@pytest.fixture
def reader_factory() -> Iterator[Callable[[Path, str], Reader]]:
    opened: list[Reader] = []

    def make(directory: Path, mode: str) -> Reader:
        reader = Reader(directory, mode)
        opened.append(reader)
        return reader

    yield make
    for reader in opened:
        reader.close()


@pytest.mark.parametrize("mode", ["embedded", "split"])
@pytest.mark.parametrize("ending", ["clean", "crash"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_damage(tmp_path: Path, kind: str, ending: str, mode: str,
                reader_factory: Callable[[Path, str], Reader]) -> None:
    directory = tmp_path / "store"
    acked = _write_corpus(directory, mode, ending)
    assert len(acked) == MESSAGES
    make_damage, segment, reported = KINDS[kind]
    lost = make_damage(directory, acked, segment)
    _, corruptions = verify_store(directory)
    if reported:
        assert corruptions, f"verify did not report {kind}"
    reader = reader_factory(directory, mode)
    report = reader.store.recovery_report
    if kind in ("truncated-segment", "missing-segment"):  # repaired at load: always told
        assert report.damage, f"recovery did not report {kind}"
    assert report.truncated_bytes <= 4 * 64 + 70, "recovery cut more than a tail"
    if kind in ("torn-tail", "garbage-tail"):  # cut and zeroed, after a clean close too
        assert report.truncated_bytes > 0
        path, at = _segment(directory, acked[-1].end)
        with path.open("rb") as file:
            file.seek(at)
            assert not any(file.read(4 * 64 + 70)), "the cut tail was not zeroed"
    for message in acked:
        topic, queue_id = message.key
        with reader.get(topic, queue_id, message.queue_offset) as pulled:
            if message.number in lost:
                assert pulled.status is GetStatus.MESSAGE_CORRUPT, (message, pulled)
                assert pulled.next_offset == message.queue_offset + 1
                with pytest.raises((NoRecordError, StoreCorruptError)):
                    reader.store.message_at(message.position)
                continue
            assert pulled.status is GetStatus.FOUND, (kind, message, pulled, pulled.reason)
            assert bytes(pulled.messages[0].body) == body_for(message.number)
        assert reader.store.message_at(message.position).body == body_for(message.number)
    for message in acked[::7]:
        if message.number not in lost:
            assert reader.by_key(message.key[0], f"key-{message.number}") == [
                body_for(message.number)]
    for topic in TOPICS:
        for queue_id in range(3):
            used = [a.queue_offset for a in acked if a.key == (topic, queue_id)]
            following = reader.store.put(Message(topic, queue_id, b"after"))
            assert following.ok
            assert following.queue_offset == max(used) + 1, "a queue offset was reused"


def test_refuse_policy_opens_nothing_and_changes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    acked = _write_corpus(directory, "embedded", "clean")
    _flip_body_byte(directory, acked, -1)  # in recovery's window of recent segments
    before = {path: path.read_bytes() for path in (directory / "commitlog").iterdir()}
    with pytest.raises(StoreCorruptError, match="corruption_policy=refuse"):
        MessageStore.open(directory, small_config(corruption_policy=CorruptionPolicy.REFUSE))
    assert {path: path.read_bytes() for path in (directory / "commitlog").iterdir()} == before
    (directory / "commitlog" / f"{2 * SMALL_SEGMENT_BYTES:020d}").unlink()
    with pytest.raises(StoreFormatError, match="missing"):
        MessageStore.open(directory, small_config(corruption_policy=CorruptionPolicy.REFUSE))
