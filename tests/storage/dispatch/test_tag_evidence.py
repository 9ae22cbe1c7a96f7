"""`index_tags_enabled = None`: a store indexes tags as its index already does
(storage/dispatch/tag_evidence.py), so a RocketMQ 4.9 store keeps 4.9's index byte for byte and a
5.x store 5.x's; a new store indexes them (5.x).  Plus the vote itself, and the setting as
text and YAML."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mqstore.services.common.settings.values import from_yaml
from mqstore.storage import Message, MessageStore, StoreConfig
from mqstore.storage.config_text import coerce_text
from mqstore.storage.dispatch.tag_evidence import VOTES_MAX, index_tags_for_store, tag_entries_held
from mqstore.storage.errors import ConfigError
from mqstore.storage.files.index_file import index_key_hash
from tests.conftest import small_config

HINT = bool | None


def _index_digests(store_dir: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted((store_dir / "index").iterdir())}


def _put(store: MessageStore, count: int, *, keyed: bool, first: int = 0) -> None:
    for n in range(first, first + count):
        keys = (f"k{n}",) if keyed else ()
        assert store.put(Message("Orders", n % 2, b"m%d" % n, tags="red", keys=keys)).ok
    assert store.wait_dispatched(timeout_ms=10_000)


def _written_as_rocketmq_4_9(store_dir: Path) -> None:
    """Keyed, then tagged messages without keys (which 4.9 does not index at all, so the
    index ends at the last keyed one), by a writer that writes no tag entries."""
    with MessageStore.open(store_dir, small_config(index_tags_enabled=False)) as store:
        _put(store, 20, keyed=True)
        _put(store, 6, keyed=False, first=20)


def test_a_store_without_tag_entries_reopens_without_a_byte_of_index_changed(
        store_dir: Path) -> None:
    """Issue 26: with tags on, the reopened store dispatched again from the index's end (the
    start of its last keyed message) and added the tag entries of that message and of the six
    after it.  As the index holds, it adds none, and keeps indexing keys only."""
    _written_as_rocketmq_4_9(store_dir)
    before = _index_digests(store_dir)
    assert index_tags_for_store(store_dir, small_config()) is False
    with MessageStore.open(store_dir, small_config()):
        pass
    assert _index_digests(store_dir) == before
    with MessageStore.open(store_dir, small_config()) as store:
        _put(store, 3, keyed=True, first=26)
        assert store.query_by_tag("Orders", "red") == []
        assert [m.body for m in store.query_by_key("Orders", "k27")] == [b"m27"]


def test_an_explicit_setting_is_honoured(store_dir: Path) -> None:
    """What the default did before: tags on for a store whose index holds none adds the
    tag entries of the messages from the index's end on (7 here)."""
    _written_as_rocketmq_4_9(store_dir)
    before = _index_digests(store_dir)
    assert index_tags_for_store(store_dir, small_config(index_tags_enabled=True)) is True
    with MessageStore.open(store_dir, small_config(index_tags_enabled=True)) as store:
        tagged = store.query_by_tag("Orders", "red", max_messages=64)
        assert [m.body for m in tagged] == [b"m%d" % n for n in range(19, 26)]
    assert _index_digests(store_dir) != before


def test_a_store_with_tag_entries_keeps_indexing_tags(store_dir: Path) -> None:
    with MessageStore.open(store_dir, small_config(index_tags_enabled=True)) as store:
        _put(store, 10, keyed=True)
    assert index_tags_for_store(store_dir, small_config()) is True
    with MessageStore.open(store_dir, small_config()) as store:
        _put(store, 2, keyed=False, first=10)
        tagged = store.query_by_tag("Orders", "red", max_messages=64)
        assert [m.body for m in tagged] == [b"m%d" % n for n in range(12)]


def test_a_new_store_indexes_tags_as_rocketmq_5(store_dir: Path) -> None:
    assert index_tags_for_store(store_dir, small_config()) is True
    with MessageStore.open(store_dir, small_config()) as store:
        _put(store, 3, keyed=False)
        assert len(store.query_by_tag("Orders", "red")) == 3


# --------------------------------------------------------------------------- the vote


def _vote(messages: list[tuple[int, bool]], *, untagged: tuple[int, ...] = ()) -> bool | None:
    """`tag_entries_held` over an index of `messages` (offset, tag entry held), newest last,
    each with a UNIQ_KEY entry; offsets in `untagged` carry no TAGS."""
    tag_hash = index_key_hash("Orders#T#red")
    entries: list[tuple[int, int]] = []
    for offset, held in messages:
        entries.append((index_key_hash(f"Orders#uniq-{offset}"), offset))
        if held:
            entries.append((tag_hash, offset))
    tags = {offset: ("Orders", None if offset in untagged else "red")
            for offset, _ in messages}
    return tag_entries_held(entries[::-1], tags_at=tags.get)


def test_the_vote_is_the_majority_of_the_newest_tagged_messages() -> None:
    assert _vote([]) is None
    assert _vote([(0, False)], untagged=(0,)) is None
    assert _vote([(0, True), (100, True)]) is True
    assert _vote([(0, False), (100, False)]) is False
    # A 4.9 store an older mqstore opened: one tag entry, at the index's end.
    assert _vote([(n * 100, False) for n in range(5)] + [(500, True)]) is False
    # A tie goes to the newest; only the newest VOTES_MAX tagged messages count.
    assert _vote([(0, True), (100, False)]) is False
    assert _vote([(n * 100, True) for n in range(20)]
                 + [(n * 100, False) for n in range(20, 20 + VOTES_MAX)]) is False
    assert _vote([(0, True), (100, True)], untagged=(100,)) is True


# --------------------------------------------------------------------------- as text and YAML


def test_the_setting_reads_auto_and_null_as_decided_by_the_store() -> None:
    where = "option store.index_tags_enabled"
    assert coerce_text("auto", HINT, where=where) is None
    assert coerce_text("None", HINT, where=where) is None
    assert coerce_text("false", HINT, where=where) is False
    assert coerce_text("on", HINT, where=where) is True
    with pytest.raises(ConfigError, match="is not a boolean"):
        coerce_text("maybe", HINT, where=where)
    assert from_yaml(None, HINT, where=where) is None
    assert from_yaml(False, HINT, where=where) is False
    with pytest.raises(ConfigError):
        from_yaml("false", HINT, where=where)
    assert StoreConfig().index_tags_enabled is None
