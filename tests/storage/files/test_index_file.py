"""One index file: byte layout, put, chains, time ranges, full, reopen, corrupt files.

Tiny files (4 slots, 8 or 64 entries) so chains collide and files fill in a few puts.  The
layout is checked with struct formats written out here, apart from the module's own.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mqstore.storage.errors import IndexFileCreateError, IndexFileFormatError, StoreFormatError
from mqstore.storage.files.index_file import IndexFile, index_file_size_bytes, index_key_hash
from mqstore.storage.files.index_put import INT32_MAX
from mqstore.storage.format.java_hash import java_string_hash
from mqstore.storage.format.volume import (
    index_file_name,
    index_file_name_after,
    parse_index_file_name,
)

SLOTS = 4
ENTRIES = 64
HEADER = ">qqqqii"
ENTRY = ">iqii"
BASE_MS = 1_700_000_000_000
ALL_TIME = {"begin_ms": 0, "end_ms": 1 << 62}


def _create(directory: Path, *, entries: int = ENTRIES, end_physical_offset: int = 0,
            end_timestamp_ms: int = 0, name: str = "20250101000000000") -> IndexFile:
    (directory.parent / "creating").mkdir(exist_ok=True)
    return IndexFile.create(directory / name, creating=directory.parent / "creating" / name,
                            hash_slot_count=SLOTS, index_count_max=entries,
                            previous_end_physical_offset=end_physical_offset,
                            previous_end_timestamp_ms=end_timestamp_ms)


def _reopen(index_file: IndexFile, *, entries: int = ENTRIES) -> IndexFile:
    index_file.flush()
    index_file.close()
    return IndexFile.open_existing(index_file.path, hash_slot_count=SLOTS,
                                   index_count_max=entries)


def _slot(key: str) -> int:
    return index_key_hash(key) % SLOTS


def _keys_in_slot(slot: int, count: int) -> list[str]:
    keys = [f"T#k{number}" for number in range(1000) if _slot(f"T#k{number}") == slot]
    return keys[:count]


def test_size_is_header_slots_and_entries(tmp_path: Path) -> None:
    assert index_file_size_bytes(hash_slot_count=5_000_000,
                                 index_count_max=20_000_000) == 420_000_040
    index_file = _create(tmp_path)
    assert index_file.path.stat().st_size == 40 + SLOTS * 4 + ENTRIES * 20
    assert [path.name for path in tmp_path.iterdir()] == ["20250101000000000"]


def test_layout_byte_for_byte(tmp_path: Path) -> None:
    index_file = _create(tmp_path)
    key = "TopicTest#key-1"
    assert java_string_hash(key) == 204089217
    assert index_file.put_key(key, physical_offset=4096, store_timestamp_ms=BASE_MS)
    assert index_file.put_key(key, physical_offset=8192, store_timestamp_ms=BASE_MS + 2500)
    data = _reopen(index_file).path.read_bytes()
    assert struct.unpack_from(HEADER, data, 0) == (BASE_MS, BASE_MS + 2500, 4096, 8192, 1, 3)
    slot = 204089217 % SLOTS
    for other in range(SLOTS):
        expected = 2 if other == slot else 0
        assert struct.unpack_from(">i", data, 40 + 4 * other) == (expected,)
    entries_at = 40 + 4 * SLOTS
    assert data[entries_at:entries_at + 20] == bytes(20), "entry 0 is never written"
    assert struct.unpack_from(ENTRY, data, entries_at + 20 * 1) == (204089217, 4096, 0, 0)
    assert struct.unpack_from(ENTRY, data, entries_at + 20 * 2) == (204089217, 8192, 2, 1)
    assert not any(data[entries_at + 20 * 3:])


def test_fresh_header_and_one_copied_from_the_previous_file(tmp_path: Path) -> None:
    fresh = _create(tmp_path)
    assert fresh.path.read_bytes()[:40] == struct.pack(HEADER, 0, 0, 0, 0, 0, 1)
    assert (fresh.index_count, fresh.entry_count, fresh.is_full) == (1, 0, False)
    rolled = _create(tmp_path, end_physical_offset=777, end_timestamp_ms=BASE_MS,
                     name="20250101000000001")
    assert rolled.path.read_bytes()[:40] == struct.pack(HEADER, BASE_MS, BASE_MS, 777, 777,
                                                        0, 1)
    assert (rolled.begin_timestamp_ms, rolled.end_timestamp_ms) == (BASE_MS, BASE_MS)
    assert (rolled.begin_physical_offset, rolled.end_physical_offset) == (777, 777)


def test_first_entry_of_a_rolled_file_is_timed_against_the_copied_begin(tmp_path: Path) -> None:
    """RocketMQ's order of steps: the diff uses the copied begin, then begin is replaced."""
    rolled = _create(tmp_path, end_physical_offset=100, end_timestamp_ms=BASE_MS)
    assert rolled.put_key("T#a", physical_offset=200, store_timestamp_ms=BASE_MS + 5000)
    assert rolled.begin_timestamp_ms == BASE_MS + 5000
    assert not list(rolled.candidates("T#a", begin_ms=BASE_MS + 5000, end_ms=BASE_MS + 9999))
    assert list(rolled.candidates("T#a", begin_ms=BASE_MS + 10_000,
                                  end_ms=BASE_MS + 10_000)) == [200], "stored at +5 s, reads +10 s"


def test_append_until_full(tmp_path: Path) -> None:
    index_file = _create(tmp_path, entries=8)
    for number in range(7):
        assert index_file.put_key(f"T#k{number}", physical_offset=number,
                                  store_timestamp_ms=BASE_MS)
    assert index_file.is_full
    assert index_file.entry_count == 7
    header = index_file.path.read_bytes()[:40]
    assert not index_file.put_key("T#late", physical_offset=99, store_timestamp_ms=BASE_MS)
    assert index_file.path.read_bytes()[:40] == header, "a refused put changes nothing"
    assert index_file.end_physical_offset == 6


def test_reopen_keeps_header_and_chains(tmp_path: Path) -> None:
    index_file = _create(tmp_path)
    for number in range(20):
        index_file.put_key(f"T#k{number % 5}", physical_offset=number * 100,
                           store_timestamp_ms=BASE_MS + number * 1000)
    before = [list(index_file.candidates(f"T#k{n}", **ALL_TIME)) for n in range(5)]
    header = (index_file.begin_timestamp_ms, index_file.end_timestamp_ms,
              index_file.begin_physical_offset, index_file.end_physical_offset,
              index_file.hash_slot_used_count, index_file.index_count)
    reopened = _reopen(index_file)
    assert (reopened.begin_timestamp_ms, reopened.end_timestamp_ms,
            reopened.begin_physical_offset, reopened.end_physical_offset,
            reopened.hash_slot_used_count, reopened.index_count) == header
    assert [list(reopened.candidates(f"T#k{n}", **ALL_TIME)) for n in range(5)] == before
    assert before[0] == [1500, 1000, 500, 0]
    assert reopened.put_key("T#k0", physical_offset=5000, store_timestamp_ms=BASE_MS + 30_000)
    assert list(reopened.candidates("T#k0", **ALL_TIME)) == [5000, *before[0]]


def test_slot_collisions_share_a_chain_but_not_their_hashes(tmp_path: Path) -> None:
    first, second = _keys_in_slot(1, 2)
    index_file = _create(tmp_path)
    index_file.put_key(first, physical_offset=10, store_timestamp_ms=BASE_MS)
    index_file.put_key(second, physical_offset=20, store_timestamp_ms=BASE_MS)
    index_file.put_key(first, physical_offset=30, store_timestamp_ms=BASE_MS)
    assert index_file.hash_slot_used_count == 1, "one chain, three entries"
    assert list(index_file.candidates(first, **ALL_TIME)) == [30, 10]
    assert list(index_file.candidates(second, **ALL_TIME)) == [20]
    assert not list(index_file.candidates(_keys_in_slot(2, 1)[0], **ALL_TIME))


def test_an_equal_hash_is_a_candidate_although_the_key_differs(tmp_path: Path) -> None:
    """"Aa" and "BB" share a Java hashCode: the file cannot tell them apart."""
    assert java_string_hash("T#Aa") == java_string_hash("T#BB")
    index_file = _create(tmp_path)
    index_file.put_key("T#Aa", physical_offset=10, store_timestamp_ms=BASE_MS)
    assert list(index_file.candidates("T#BB", **ALL_TIME)) == [10]


def test_min_value_hash_goes_to_slot_zero(tmp_path: Path) -> None:
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hash("T#Aa") == abs(java_string_hash("T#Aa"))
    index_file = _create(tmp_path)
    index_file.put_key("polygenelubricants", physical_offset=1, store_timestamp_ms=BASE_MS)
    data = _reopen(index_file).path.read_bytes()
    assert struct.unpack_from(">i", data, 40) == (1,)
    assert struct.unpack_from(ENTRY, data, 40 + 4 * SLOTS + 20) == (0, 1, 0, 0)


def test_time_range_filters_and_stops_at_an_older_entry(tmp_path: Path) -> None:
    index_file = _create(tmp_path)
    for seconds in (0, 10, 2, 8):  # out of order on purpose: the walk trusts the order
        index_file.put_key("T#k", physical_offset=seconds, store_timestamp_ms=BASE_MS
                           + seconds * 1000)
    found = list(index_file.candidates("T#k", begin_ms=BASE_MS + 5000, end_ms=BASE_MS + 9000))
    assert found == [8], "2 s is older than begin: the walk stops before reaching 10 s"
    found = list(index_file.candidates("T#k", begin_ms=BASE_MS, end_ms=BASE_MS + 10_000))
    assert found == [8, 2, 10, 0]
    assert not list(index_file.candidates("T#k", begin_ms=BASE_MS + 11_000, end_ms=1 << 62))


def test_time_diff_is_clamped(tmp_path: Path) -> None:
    index_file = _create(tmp_path)
    index_file.put_key("T#a", physical_offset=0, store_timestamp_ms=BASE_MS)
    index_file.put_key("T#b", physical_offset=1, store_timestamp_ms=BASE_MS - 60_000)
    index_file.put_key("T#c", physical_offset=2, store_timestamp_ms=BASE_MS + (1 << 45))
    data = _reopen(index_file).path.read_bytes()
    diffs = [struct.unpack_from(ENTRY, data, 40 + 4 * SLOTS + 20 * n)[2] for n in (1, 2, 3)]
    assert diffs == [0, 0, INT32_MAX]


def test_overlaps_time_range_on_a_file(tmp_path: Path) -> None:
    index_file = _create(tmp_path, end_timestamp_ms=100)
    index_file.put_key("T#a", physical_offset=0, store_timestamp_ms=100)
    index_file.put_key("T#a", physical_offset=1, store_timestamp_ms=200)
    assert index_file.overlaps_time_range(begin_ms=50, end_ms=250)
    assert index_file.overlaps_time_range(begin_ms=150, end_ms=160)
    assert index_file.overlaps_time_range(begin_ms=200, end_ms=900)
    assert not index_file.overlaps_time_range(begin_ms=201, end_ms=900)
    assert not index_file.overlaps_time_range(begin_ms=0, end_ms=99)


def test_wrong_size_is_a_format_error(tmp_path: Path) -> None:
    index_file = _create(tmp_path)
    index_file.close()
    with pytest.raises(IndexFileFormatError, match="hash_slot_count=8"):
        IndexFile.open_existing(index_file.path, hash_slot_count=8, index_count_max=ENTRIES)
    with open(index_file.path, "r+b") as handle:
        handle.truncate(100)
    with pytest.raises(StoreFormatError, match="100 bytes"):
        IndexFile.open_existing(index_file.path, hash_slot_count=SLOTS, index_count_max=ENTRIES)


def test_corrupt_index_count(tmp_path: Path) -> None:
    index_file = _create(tmp_path, entries=8)
    index_file.close()
    with open(index_file.path, "r+b") as handle:
        handle.seek(36)
        handle.write(struct.pack(">i", 9))
    with pytest.raises(IndexFileFormatError, match="index_count=9"):
        IndexFile.open_existing(index_file.path, hash_slot_count=SLOTS, index_count_max=8)


@pytest.mark.parametrize("stored_count", [0, -5])
def test_index_count_at_or_below_zero_loads_as_one(tmp_path: Path, stored_count: int) -> None:
    index_file = _create(tmp_path)
    index_file.close()
    with open(index_file.path, "r+b") as handle:
        handle.seek(36)
        handle.write(struct.pack(">i", stored_count))
    reopened = IndexFile.open_existing(index_file.path, hash_slot_count=SLOTS,
                                       index_count_max=ENTRIES)
    assert (reopened.index_count, reopened.entry_count) == (1, 0)
    assert reopened.put_key("T#a", physical_offset=5, store_timestamp_ms=BASE_MS)
    assert list(reopened.candidates("T#a", **ALL_TIME)) == [5]


def _corrupt_entry(index_file: IndexFile, index: int, *, diff: int, previous: int) -> IndexFile:
    index_file.flush()
    index_file.close()
    position = 40 + 4 * SLOTS + 20 * index + 12
    with open(index_file.path, "r+b") as handle:
        handle.seek(position)
        handle.write(struct.pack(">ii", diff, previous))
    return IndexFile.open_existing(index_file.path, hash_slot_count=SLOTS,
                                   index_count_max=ENTRIES)


def test_a_negative_time_diff_ends_the_chain(tmp_path: Path) -> None:
    index_file = _create(tmp_path)
    for number in range(3):
        index_file.put_key("T#k", physical_offset=number, store_timestamp_ms=BASE_MS)
    reopened = _corrupt_entry(index_file, 2, diff=-1, previous=1)
    assert list(reopened.candidates("T#k", **ALL_TIME)) == [2]


@pytest.mark.parametrize("previous", [3, 2, 63, 1000])
def test_a_link_to_itself_or_forward_ends_the_chain(tmp_path: Path, previous: int) -> None:
    index_file = _create(tmp_path)
    for number in range(3):
        index_file.put_key("T#k", physical_offset=number, store_timestamp_ms=BASE_MS)
    reopened = _corrupt_entry(index_file, 2, diff=0, previous=previous)
    assert list(reopened.candidates("T#k", **ALL_TIME)) == [2, 1]


def test_a_slot_beyond_the_count_is_empty_on_read_and_on_put(tmp_path: Path) -> None:
    index_file = _create(tmp_path)
    index_file.put_key("T#k", physical_offset=7, store_timestamp_ms=BASE_MS)
    index_file.close()
    with open(index_file.path, "r+b") as handle:
        handle.seek(40 + 4 * _slot("T#k"))
        handle.write(struct.pack(">i", 40))
    reopened = IndexFile.open_existing(index_file.path, hash_slot_count=SLOTS,
                                       index_count_max=ENTRIES)
    assert not list(reopened.candidates("T#k", **ALL_TIME))
    reopened.put_key("T#k", physical_offset=8, store_timestamp_ms=BASE_MS)
    assert list(reopened.candidates("T#k", **ALL_TIME)) == [8]
    assert reopened.hash_slot_used_count == 2, "the slot was counted empty again"


def test_flush_syncs_only_after_writes(tmp_path: Path) -> None:
    index_file = _create(tmp_path)
    assert not index_file.flush()
    index_file.put_key("T#a", physical_offset=0, store_timestamp_ms=BASE_MS)
    assert index_file.flush()
    assert not index_file.flush()


def test_create_refuses_an_existing_name_and_leaves_no_temporary(tmp_path: Path) -> None:
    _create(tmp_path).close()
    with pytest.raises(IndexFileCreateError, match="already exists"):
        _create(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["20250101000000000"]


def test_close_with_delete_removes_the_file(tmp_path: Path) -> None:
    index_file = _create(tmp_path)
    index_file.close(delete=True)
    index_file.close(delete=True)
    assert index_file.is_closed
    assert not list(tmp_path.iterdir())


def test_names_are_seventeen_digit_local_times() -> None:
    name = index_file_name(BASE_MS + 45)
    assert len(name) == 17
    assert name.isdigit()
    assert name.endswith("045")
    parsed = parse_index_file_name(name)
    assert parsed is not None
    assert parsed.microsecond == 45_000
    assert index_file_name_after("20250101235959999") == "20250102000000000"
    assert index_file_name_after("20250101000000000") == "20250101000000001"
    for bad in ("2025010100000000", "2025010100000000x", "20251301000000000", "x" * 17):
        assert parse_index_file_name(bad) is None
