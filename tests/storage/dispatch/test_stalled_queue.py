"""A file-system error on one consume queue's files stalls that queue only
(storage/dispatch/dispatcher.py): every other queue and the index go on, the stalled queue is
reported, and its records are put again once its files can be written.  Issue 26 found a
255-byte topic whose file name in `creating/` the file system refused halting dispatch of
every topic."""

from __future__ import annotations

import errno
import time
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore, StoreConfig
from mqstore.storage.files import consume_queue_file
from mqstore.storage.format.topic import LEGAL_TOPIC_CHARACTERS
from mqstore.storage.format.volume import (
    CONSUME_QUEUE_DIRECTORY,
    NAME_SIZE_BYTES_MAX,
    consume_queue_creating_name,
)

LONGEST_TOPIC = "T" * 255


def _config(**changes: object) -> StoreConfig:
    return StoreConfig.for_small_segments(1 << 20, topic_size_bytes_max=255,
                                          stalled_queue_retry_interval_ms=50, **changes)


def _bodies(store: MessageStore, topic: str, queue_id: int = 0) -> list[bytes]:
    with store.get(topic, queue_id, 0, 32) as pulled:
        return [bytes(m.body) for m in pulled.messages]


def test_a_255_byte_topic_is_dispatched_with_every_other_topic(tmp_path: Path) -> None:
    """The name the queue's first file is prepared under fits whatever the topic (issue 26:
    `creating/consumequeue.<topic>.<queue>.<start>` was 300 bytes, OSError 36, and no queue
    of any topic advanced again)."""
    with MessageStore.open(tmp_path / "store", _config()) as store:
        assert store.put(Message(LONGEST_TOPIC, 0, b"long", keys=("k-long",))).ok
        assert store.put(Message("Other", 0, b"other")).ok
        assert store.wait_dispatched(timeout_ms=5000)
        assert _bodies(store, LONGEST_TOPIC) == [b"long"]
        assert _bodies(store, "Other") == [b"other"]
        assert [m.queue_offset for m in store.query_by_key(LONGEST_TOPIC, "k-long")] == [0]
        assert store.dispatch_stalled_queues == []
    queue_directory = tmp_path / "store" / CONSUME_QUEUE_DIRECTORY / LONGEST_TOPIC / "0"
    assert [p.name for p in queue_directory.iterdir()] == ["0" * 20]


@pytest.mark.parametrize("length", [1, 127, 128, 200, 254, 255])
def test_creating_name_fits_a_name_whatever_the_topic(length: int) -> None:
    topic = (LEGAL_TOPIC_CHARACTERS * 4)[:length]
    name = consume_queue_creating_name(topic, 2**31 - 1, 10**19)
    assert len(name.encode()) <= NAME_SIZE_BYTES_MAX
    assert name != consume_queue_creating_name(topic[:-1] + "Z" if topic[-1] != "Z" else
                                               topic[:-1] + "Y", 2**31 - 1, 10**19)


def test_one_queue_whose_files_fail_stalls_alone_and_resumes(tmp_path: Path) -> None:
    """A plain file where the queue's directory must be (EEXIST/ENOTDIR: an error of that
    queue's files, not of the disk): the queue stalls, the others and the index go on; once
    the file is gone the retry puts its records, in order, with none lost."""
    directory = tmp_path / "store"
    (directory / CONSUME_QUEUE_DIRECTORY).mkdir(parents=True)
    blocker = directory / CONSUME_QUEUE_DIRECTORY / "Blocked"
    blocker.write_bytes(b"not a directory")
    with MessageStore.open(directory, _config()) as store:
        for number in range(3):
            assert store.put(Message("Blocked", 0, b"b%d" % number, keys=(f"b{number}",))).ok
            assert store.put(Message("Free", 0, b"f%d" % number)).ok
        assert store.wait_dispatched(timeout_ms=5000), "dispatch stopped on one queue's error"
        assert _bodies(store, "Free") == [b"f0", b"f1", b"f2"]
        assert [m.queue_offset for m in store.query_by_key("Blocked", "b2")] == [2]
        stalled = store.dispatch_stalled_queues
        assert [(s.topic, s.queue_id, s.queue_offset) for s in stalled] == [("Blocked", 0, 0)]
        assert stalled[0].physical_offset == 0
        assert _bodies(store, "Blocked") == []
        assert store.dispatch_stalled_reason is None  # the rest of dispatch is not stalled

        blocker.unlink()
        deadline = time.monotonic() + 10
        while store.dispatch_stalled_queues and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store.dispatch_stalled_queues == []
        assert store.put(Message("Blocked", 0, b"b3")).ok
        assert store.wait_dispatched(timeout_ms=5000)
        assert _bodies(store, "Blocked") == [b"b0", b"b1", b"b2", b"b3"]


def test_a_full_disk_still_stalls_all_of_dispatch(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC is the disk's trouble, not one queue's: dispatch as a whole waits (and retries
    the same record), so no queue is marked stalled and none skips a record."""
    def no_space(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with MessageStore.open(tmp_path / "store", _config(dispatch_retry_interval_ms=20)) as store:
        monkeypatch.setattr(consume_queue_file.ConsumeQueueFile, "create", no_space)
        assert store.put(Message("Full", 0, b"a")).ok
        deadline = time.monotonic() + 5
        while store.dispatch_stalled_reason is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.dispatch_stalled_reason is not None
        assert store.dispatch_stalled_queues == []
        monkeypatch.undo()
        assert store.wait_dispatched(timeout_ms=5000)
        assert _bodies(store, "Full") == [b"a"]
