"""The index service: exact queries under collisions, rolls, time ranges, abnormal load,
retention, duplicate dispatch.

Files of 4 slots and 8 entries (7 usable) roll every two or three messages, and "Aa"/"BB"
share a Java hashCode, so every chain mixes keys.  `Corpus` plays the commit log: it knows
each message's topic and keys by offset, as the store does by decoding the record.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore
from mqstore.storage.errors import ConfigError, IndexFileFormatError, StoreClosedError
from mqstore.storage.files.index_file import IndexFile
from mqstore.storage.format.java_hash import java_string_hash
from mqstore.storage.format.volume import parse_index_file_name
from mqstore.storage.index.index_service import IndexService
from tests.conftest import small_config
from tests.storage.dispatch.split_helpers import lose_log_tail

SLOTS = 4
ENTRIES = 8
BASE_MS = 1_700_000_000_000
ALL_TIME = {"begin_ms": 0, "end_ms": 1 << 62}


@dataclasses.dataclass(frozen=True)
class Stored:
    topic: str
    keys: tuple[str, ...]
    unique_key: str | None
    store_timestamp_ms: int


@dataclasses.dataclass
class Corpus:
    messages: dict[int, Stored] = dataclasses.field(default_factory=dict)
    rolls: list[int] = dataclasses.field(default_factory=list)
    """Each end time `build` returned: the checkpoint's index timestamps."""

    def put(self, service: IndexService, *, topic: str, keys: tuple[str, ...],
            unique_key: str | None = None, store_timestamp_ms: int = BASE_MS) -> int:
        physical_offset = 100 * len(self.messages)
        self.messages[physical_offset] = Stored(topic, keys, unique_key, store_timestamp_ms)
        self.dispatch(service, physical_offset)
        return physical_offset

    def dispatch(self, service: IndexService, physical_offset: int) -> None:
        stored = self.messages[physical_offset]
        rolled = service.build(topic=stored.topic, keys=stored.keys,
                               unique_key=stored.unique_key, tags=None,
                               physical_offset=physical_offset,
                               store_timestamp_ms=stored.store_timestamp_ms)
        if rolled is not None:
            self.rolls.append(rolled)

    def key_matches(self, *, topic: str, key: str) -> Callable[[int], bool]:
        def matches(physical_offset: int) -> bool:
            stored = self.messages[physical_offset]
            return stored.topic == topic and (key in stored.keys or key == stored.unique_key)
        return matches

    def expected(self, *, topic: str, key: str, begin_ms: int = 0,
                 end_ms: int = 1 << 62) -> list[int]:
        matches = self.key_matches(topic=topic, key=key)
        return sorted(offset for offset, stored in self.messages.items()
                      if matches(offset) and begin_ms <= stored.store_timestamp_ms <= end_ms)

    def query(self, service: IndexService, *, topic: str, key: str, begin_ms: int = 0,
              end_ms: int = 1 << 62, max_results: int = 64) -> list[int]:
        return service.query(topic=topic, key=key, begin_ms=begin_ms, end_ms=end_ms,
                             max_results=max_results,
                             key_matches=self.key_matches(topic=topic, key=key))


def _service(directory: Path, *, entries: int = ENTRIES, results_max: int = 64,
             abnormal: bool = False, index_timestamp_ms: int = 0) -> IndexService:
    service = IndexService(directory=directory, hash_slot_count=SLOTS, index_count_max=entries,
                           query_results_max=results_max)
    service.load(abnormal=abnormal, index_timestamp_ms=index_timestamp_ms)
    return service


def _fill(service: IndexService, corpus: Corpus, count: int) -> None:
    """Message n: unique key Un, keys "hot" and "Aa" or "BB", stored at BASE + n s."""
    for number in range(count):
        corpus.put(service, topic="T", keys=("hot", "Aa" if number % 2 else "BB"),
                   unique_key=f"U{number}", store_timestamp_ms=BASE_MS + number * 1000)


@pytest.mark.parametrize(("slots", "entries", "results", "match"), [
    (0, 8, 64, "hash_slot_count"), (4, 1, 64, "index_count_max"),
    (4, 8, 0, "query_results_max"), (500_000_000, 20_000_000, 64, "int positions")])
def test_counts_no_index_file_can_have(tmp_path: Path, slots: int, entries: int,
                                       results: int, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        IndexService(directory=tmp_path, hash_slot_count=slots, index_count_max=entries,
                     query_results_max=results)


def test_an_empty_index(tmp_path: Path) -> None:
    service = _service(tmp_path / "index")
    assert service.file_paths == []
    assert Corpus().query(service, topic="T", key="k") == []
    assert service.build(topic="T", keys=("", ""), unique_key=None, tags=None,
                         physical_offset=0,
                         store_timestamp_ms=BASE_MS) is None
    assert service.file_paths == [], "nothing to index creates no file"
    assert (service.end_physical_offset, service.end_timestamp_ms) == (0, 0)


def test_results_are_exact_under_hash_collisions(tmp_path: Path) -> None:
    service = _service(tmp_path, entries=64)
    corpus = Corpus()
    _fill(service, corpus, 12)
    corpus.put(service, topic="Other", keys=("Aa",))
    assert java_string_hash("T#Aa") == java_string_hash("T#BB")
    for key in ("Aa", "BB", "hot", "U3", "missing"):
        assert corpus.query(service, topic="T", key=key) == corpus.expected(topic="T", key=key)
    assert corpus.query(service, topic="Other", key="Aa") == [1200]
    raw = service.query(topic="T", key="Aa", max_results=64, key_matches=lambda _: True,
                        **ALL_TIME)
    assert raw == sorted(corpus.expected(topic="T", key="Aa")
                         + corpus.expected(topic="T", key="BB"))
    assert len(raw) == 12, "what RocketMQ would return: the hash cannot tell Aa from BB"


def test_rolls_across_files(tmp_path: Path) -> None:
    service = _service(tmp_path)
    corpus = Corpus()
    _fill(service, corpus, 30)  # 90 entries, 7 per file
    paths = service.file_paths
    assert len(paths) == 13
    assert len(corpus.rolls) == 12
    assert [path.name for path in paths] == sorted(path.name for path in paths)
    assert len({path.name for path in paths}) == 13, "same-millisecond names are bumped"
    assert all(parse_index_file_name(path.name) is not None for path in paths)
    for path, rolled_end_ms in zip(paths, corpus.rolls, strict=False):
        full = IndexFile.open_existing(path, hash_slot_count=SLOTS, index_count_max=ENTRIES)
        assert full.is_full
        assert full.end_timestamp_ms == rolled_end_ms
        full.close()
    assert service.entry_count == 90
    assert service.end_physical_offset == 2900
    for key in ("hot", "Aa", "BB", "U0", "U17", "U29"):
        assert corpus.query(service, topic="T", key=key) == corpus.expected(topic="T", key=key)


def test_query_time_ranges_across_files(tmp_path: Path) -> None:
    service = _service(tmp_path)
    corpus = Corpus()
    _fill(service, corpus, 40)
    for begin_s, end_s in [(5, 25), (0, 0), (39, 39), (12, 13), (-10, 100), (41, 50), (7, 3)]:
        window = {"begin_ms": BASE_MS + begin_s * 1000, "end_ms": BASE_MS + end_s * 1000}
        for key in ("hot", "Aa", "BB"):
            assert (corpus.query(service, topic="T", key=key, **window)
                    == corpus.expected(topic="T", key=key, **window)), (key, begin_s, end_s)


def test_results_are_capped_to_the_newest(tmp_path: Path) -> None:
    service = _service(tmp_path, results_max=4)
    corpus = Corpus()
    _fill(service, corpus, 20)
    newest = corpus.expected(topic="T", key="hot")[-4:]
    assert corpus.query(service, topic="T", key="hot", max_results=64) == newest
    assert corpus.query(service, topic="T", key="hot", max_results=2) == newest[-2:]
    with pytest.raises(ValueError, match="max_results"):
        corpus.query(service, topic="T", key="hot", max_results=0)


def test_unique_key_lookup(tmp_path: Path) -> None:
    service = _service(tmp_path)
    corpus = Corpus()
    _fill(service, corpus, 20)
    for number in range(20):
        assert corpus.query(service, topic="T", key=f"U{number}") == [number * 100]
    assert corpus.query(service, topic="Other", key="U1") == []


def test_reopen_after_a_clean_close_keeps_every_file(tmp_path: Path) -> None:
    corpus = Corpus()
    service = _service(tmp_path)
    _fill(service, corpus, 20)
    paths = service.file_paths
    service.close()
    reopened = _service(tmp_path, abnormal=False, index_timestamp_ms=0)
    assert reopened.file_paths == paths
    for key in ("hot", "Aa", "U19"):
        assert corpus.query(reopened, topic="T", key=key) == corpus.expected(topic="T", key=key)


def test_abnormal_load_drops_files_newer_than_the_checkpoint(tmp_path: Path) -> None:
    corpus = Corpus()
    service = _service(tmp_path)
    _fill(service, corpus, 30)
    paths = service.file_paths
    checkpoint_ms = corpus.rolls[4]
    service.close()
    reopened = _service(tmp_path, abnormal=True, index_timestamp_ms=checkpoint_ms)
    assert reopened.file_paths == paths[:5]
    assert sorted(tmp_path.iterdir()) == paths[:5], "dropped files are deleted"
    found = corpus.query(reopened, topic="T", key="hot")
    assert found == [offset for offset in corpus.expected(topic="T", key="hot")
                     if corpus.messages[offset].store_timestamp_ms <= checkpoint_ms][:len(found)]
    assert len(found) >= len([m for m in corpus.messages.values()
                              if m.store_timestamp_ms < checkpoint_ms])
    for physical_offset in corpus.messages:  # recovery dispatches everything again
        corpus.dispatch(reopened, physical_offset)
    for key in ("hot", "Aa", "BB", "U0", "U29"):
        assert corpus.query(reopened, topic="T", key=key) == corpus.expected(topic="T", key=key)


def test_abnormal_load_without_an_index_checkpoint_drops_everything(tmp_path: Path) -> None:
    corpus = Corpus()
    service = _service(tmp_path)
    _fill(service, corpus, 5)
    service.close()
    reopened = _service(tmp_path, abnormal=True, index_timestamp_ms=0)
    assert reopened.file_paths == []
    assert list(tmp_path.iterdir()) == []


def test_duplicate_dispatch_is_ignored(tmp_path: Path) -> None:
    service = _service(tmp_path)
    corpus = Corpus()
    _fill(service, corpus, 10)
    entries = service.entry_count
    for physical_offset in list(corpus.messages)[:-1]:
        corpus.dispatch(service, physical_offset)
    assert service.entry_count == entries
    corpus.dispatch(service, 900)  # the newest message again (a reopened store does this)
    assert service.entry_count == entries, "RocketMQ compares with `<` and adds it again"
    assert corpus.query(service, topic="T", key="U9") == [900]
    assert corpus.query(service, topic="T", key="hot") == corpus.expected(topic="T", key="hot")


def test_delete_before_removes_leading_files_but_never_the_last(tmp_path: Path) -> None:
    service = _service(tmp_path)
    corpus = Corpus()
    _fill(service, corpus, 30)
    paths = service.file_paths
    assert service.delete_before(0) == []
    deleted = service.delete_before(1000)
    assert deleted == paths[:len(deleted)]
    assert len(deleted) >= 3
    for path in deleted:
        assert not path.exists()
    assert service.file_paths == paths[len(deleted):]
    found = corpus.query(service, topic="T", key="hot")
    assert 0 not in found
    assert found == corpus.expected(topic="T", key="hot")[-len(found):]
    assert service.delete_before(1 << 62) == paths[len(deleted):-1]
    assert service.file_paths == paths[-1:]
    assert corpus.query(service, topic="T", key="U29") == [2900]


def test_load_refuses_a_file_of_the_wrong_size(tmp_path: Path) -> None:
    service = _service(tmp_path)
    _fill(service, Corpus(), 3)
    service.close()
    stranger = IndexService(directory=tmp_path, hash_slot_count=SLOTS + 1,
                            index_count_max=ENTRIES, query_results_max=64)
    with pytest.raises(IndexFileFormatError, match="hash_slot_count=5"):
        stranger.load(abnormal=False, index_timestamp_ms=0)


def test_load_removes_leftovers_and_ignores_other_names(tmp_path: Path) -> None:
    (tmp_path / "20250101000000000.creating").write_bytes(b"partial")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "20251399000000000").write_bytes(b"not a time")
    service = _service(tmp_path)
    assert service.file_paths == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["20251399000000000",
                                                                  "notes.txt"]


def test_a_closed_service_refuses_work(tmp_path: Path) -> None:
    service = _service(tmp_path)
    _fill(service, Corpus(), 2)
    service.flush()
    service.close()
    service.close()
    with pytest.raises(StoreClosedError):
        service.build(topic="T", keys=("k",), unique_key=None, tags=None,
                         physical_offset=10_000,
                      store_timestamp_ms=BASE_MS)
    with pytest.raises(StoreClosedError):
        Corpus().query(service, topic="T", key="k")
    with pytest.raises(StoreClosedError):
        service.delete_before(0)


def test_a_log_cut_below_the_index_end_is_indexed_again(store_dir: Path) -> None:
    """A machine crash lost committed bytes the index had seen: after recovery cut the log,
    the records written there again must be found by key (the old entries past the cut
    are stale, and the query's record check drops them)."""
    config = small_config(index_enabled=True)
    with MessageStore.open(store_dir, config) as store:
        for n in range(400):
            assert store.put(Message("Keyed", n % 4, b"first %d" % n, keys=[f"k{n}"])).ok
        lost_from = store.put(Message("Keyed", 0, b"marker")).physical_offset - 30_000
        assert _wait(lambda: store.dispatch_behind_bytes == 0)
    lose_log_tail(store_dir, lost_from)
    with MessageStore.open(store_dir, config) as store:
        recovered_end = store.committed_position
        assert recovered_end <= lost_from
        for n in range(100):
            assert store.put(Message("Keyed", n % 4, b"again %d" % n, keys=[f"again{n}"])).ok
        assert _wait(lambda: store.dispatch_behind_bytes == 0)
        for stored in store.iter_messages(recovered_end):
            found = store.query_by_key("Keyed", stored.keys[0])
            assert [m.physical_offset for m in found] == [stored.physical_offset]
        # Keys whose records were lost are not found (their stale entries point elsewhere).
        lost_keys = [f"k{n}" for n in range(400)
                     if not store.query_by_key("Keyed", f"k{n}")]
        assert lost_keys, "the cut must have lost some keyed records"


def _wait(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _index_entries(store_dir: Path, config_slots: int, config_entries: int) -> int:
    total = 0
    for path in sorted((store_dir / "index").iterdir()):
        index_file = IndexFile.open_existing(path, hash_slot_count=config_slots,
                                             index_count_max=config_entries)
        total += index_file.entry_count
        index_file.close()
    return total


def test_reopening_a_store_never_indexes_a_message_twice(store_dir: Path) -> None:
    """RocketMQ's queryMessage returned the last message N+1 times after N mqstore opens."""
    config = small_config()
    with MessageStore.open(store_dir, config) as store:
        for n in range(50):
            assert store.put(Message("Keyed", n % 2, b"m%d" % n, keys=[f"k{n}"],
                                     tags="red" if n % 5 == 0 else None)).ok
        assert store.wait_dispatched(timeout_ms=10_000)
    entries = _index_entries(store_dir, config.index_hash_slot_count, config.index_count_max)
    for _ in range(3):
        with MessageStore.open(store_dir, config) as store:
            assert [m.body for m in store.query_by_key("Keyed", "k49")] == [b"m49"]
    assert _index_entries(store_dir, config.index_hash_slot_count,
                          config.index_count_max) == entries


def test_tags_are_indexed_as_rocketmq_5_does(store_dir: Path) -> None:
    with MessageStore.open(store_dir, small_config()) as store:
        for n in range(30):
            assert store.put(Message("Tagged", n % 3, b"m%d" % n,
                                     tags=("red", "blue", None)[n % 3])).ok
        assert store.put(Message("Other", 0, b"x", tags="red")).ok
        assert store.wait_dispatched(timeout_ms=10_000)
        red = store.query_by_tag("Tagged", "red", max_messages=64)
        assert [m.body for m in red] == [b"m%d" % n for n in range(0, 30, 3)]
        assert all(m.topic == "Tagged" and m.tags == "red" for m in red)
        assert store.query_by_tag("Tagged", "green") == []
    with MessageStore.open(store_dir, small_config(index_tags_enabled=False)) as store:
        assert store.put(Message("Tagged", 0, b"late", tags="red")).ok
        assert store.wait_dispatched(timeout_ms=10_000)
        assert b"late" not in [m.body for m in store.query_by_tag("Tagged", "red",
                                                                  max_messages=64)]
