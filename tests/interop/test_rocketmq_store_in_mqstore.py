"""Whole-store interop, RocketMQ -> mqstore: mqstore opens a whole store directory Apache
RocketMQ's ``DefaultMessageStore`` (4.9.4 and 5.5.0, on the JVM) wrote, and RocketMQ opens it
again after mqstore did.

Two stores per RocketMQ version (the ``store`` fixture): RocketMQ puts its corpus (topics of
1-127 bytes over four queues each, tags, keys, UNIQ_KEY, user properties, IPv4/IPv6 born
hosts), its reput dispatching consume queues and the index, then

* ``shutdown``: shuts down cleanly;
* ``crashed``: halts the JVM once dispatch caught up, without shutdown (the abort file stays).

mqstore opens the directory and reads every message by queue offset (``get``), by offset
(``message_at``, ``iter_messages``) and by key (``query_by_key``), closes, and opens and
closes it once more.  Then RocketMQ opens it again: everything must still be there, exactly
once (N opens by mqstore must not leave N extra index entries).
"""

from __future__ import annotations

from collections import Counter

import pytest

from mqstore import storage as mq
from tests.interop.corpus import (
    assert_corpus_is_varied,
    by_queue,
    duplicates,
    index_queries,
    jvm_view,
)
from tests.interop.rocketmq_jvm import RocketMqJvm
from tests.interop.store_files import INDEX_HEADER, entry_list, index_key_hash
from tests.interop.whole_store import RocketmqStore, query_mismatches, rocketmq_store

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module", params=["shutdown", "crashed"])
def store(request: pytest.FixtureRequest, rocketmq: RocketMqJvm,
          tmp_path_factory: pytest.TempPathFactory) -> RocketmqStore:
    scratch = tmp_path_factory.mktemp(f"rocketmq-{rocketmq.version}-{request.param}")
    return rocketmq_store(request.param, rocketmq, scratch / "store")


# --------------------------------------------------------------------------- harness


def test_rocketmq_wrote_a_varied_store_indexing_each_key_once(store: RocketmqStore,
                                                                rocketmq: RocketMqJvm) -> None:
    """The harness itself: RocketMQ's corpus covers the cases, spans files of every kind, and
    its own index holds one entry per key (a RocketMQ index file named like the previous one,
    created in the same millisecond, would lose entries and fail the tests below)."""
    assert_corpus_is_varied(store.expected)
    assert len(store.index) > 1, "RocketMQ wrote one index file only"
    assert len({f.name for f in store.index}) == len(store.index)
    wanted = index_queries(store.expected, tags=rocketmq.indexes_tags)
    hashes = Counter((index_key_hash(f"{topic}#T#{name}" if kind == "tag" else f"{topic}#{name}"),
                      offset) for (kind, topic, name), offsets in wanted.items()
                     for offset in offsets)
    entries = Counter((h, o) for f in store.index for h, o, _, _ in f.entries)
    assert entries == hashes


# --------------------------------------------------------------------------- mqstore reads


def test_mqstore_recovers_rocketmq_store_without_full_recovery(store: RocketmqStore) -> None:
    """A clean RocketMQ store (no abort file, RocketMQ's own checkpoint) is a NORMAL recovery,
    a crashed one ABNORMAL; never FULL (which means mqstore could not use the checkpoint)."""
    want = mq.RecoveryMode.NORMAL if store.kind == "shutdown" else mq.RecoveryMode.ABNORMAL
    assert store.reads.recovery.mode is want, store.reads.recovery
    assert store.reads.recovery.truncated_bytes == 0, store.reads.recovery
    assert store.second_recovery.mode is mq.RecoveryMode.NORMAL, store.second_recovery


def test_mqstore_get_returns_what_rocketmq_wrote(store: RocketmqStore) -> None:
    expected = by_queue(store.expected)
    assert set(store.reads.queues) == set(expected)
    for key, views in expected.items():
        got, status = store.reads.queues[key]
        assert status == "OFFSET_OVERFLOW_ONE", f"get {key} ended with {status}"
        assert [g["physical_offset"] for g in got] == [v["physical_offset"] for v in views], key
        for index, (g, want) in enumerate(zip(got, views, strict=True)):
            assert g == want, f"get {key} offset {index}"


def test_mqstore_reads_every_offset(store: RocketmqStore) -> None:
    offsets = [v["physical_offset"] for v in store.expected]
    assert store.reads.iterated == offsets, "iter_messages() order/coverage"
    for view in store.expected:
        assert store.reads.by_offset[view["physical_offset"]] == view, \
            f"message_at({view['physical_offset']})"


def test_mqstore_finds_each_key_once(store: RocketmqStore) -> None:
    wanted = index_queries(store.expected, tags=False)
    problems = [f"{query}: expected {offsets}, got {store.reads.keys[query]}"
                + (f" (duplicates {duplicates(store.reads.keys[query])})"
                   if duplicates(store.reads.keys[query]) else "")
                for query, offsets in wanted.items()
                if sorted(store.reads.keys[query]) != sorted(offsets)]
    assert not problems, f"{len(problems)} keys answered wrongly: " + "\n".join(problems[:20])


def test_mqstore_offsets_agree_with_rocketmq(store: RocketmqStore) -> None:
    want = {key: (0, len(views)) for key, views in by_queue(store.expected).items()}
    assert store.reads.offsets == want
    got = {key: (q["minOffset"], q["maxOffset"]) for key, q in store.reopened.queues.items()
           if key in want}
    assert got == want, "RocketMQ's min/max offsets after mqstore opened the store"


# --------------------------------------------------------------------------- what mqstore left


def test_mqstore_leaves_rocketmq_consume_queues_and_index_as_they_were(
        store: RocketmqStore) -> None:
    """Two opens by mqstore change no consume queue byte and add or drop no index entry (after
    a crash mqstore may rebuild index files, but with the same entries): not even a tag entry
    ("topic#T#tags") in a 4.9.x store, whose index holds none."""
    changed = sorted(path for path in store.consume_queues
                     if store.consume_queues_after.get(path) != store.consume_queues[path])
    assert not changed, f"mqstore changed consume queue files {changed[:10]}"
    before, after = entry_list(store.index), entry_list(store.index_after)
    if before != after:
        added, dropped = Counter(after) - Counter(before), Counter(before) - Counter(after)
        pytest.fail(f"index entries (key hash, offset) before mqstore: {len(before)}, after "
                    f"two opens: {len(after)}; added {list(added.items())[:10]}, dropped "
                    f"{list(dropped.items())[:10]}")


def test_mqstore_reopens_and_closes_a_closed_rocketmq_store_without_changing_a_byte(
        store: RocketmqStore) -> None:
    """A store RocketMQ shut down cleanly, opened (reading only) and closed twice by mqstore:
    every file of commitlog/, consumequeue/ and index/ keeps its sha256 (issue 26: mqstore
    added the tag entry RocketMQ 4.9 never writes to the message at the index's end, as it
    dispatches that message again: the header's end offset is where it starts)."""
    if store.kind != "shutdown":
        pytest.skip("after a crash mqstore may rebuild index files (the test above)")
    changed = sorted(path for path in store.digests
                     if store.digests_after.get(path) != store.digests[path])
    added = sorted(set(store.digests_after) - set(store.digests))
    assert (changed, added) == ([], []), f"mqstore changed {changed[:10]}, added {added[:10]}"


def test_rocketmq_rebuild_of_index_equals_mqstore_file_for_file(store: RocketmqStore,
                                                                  rocketmq: RocketMqJvm) -> None:
    """RocketMQ's index built from this commit log alone (into files of LAYOUT's 399 entries,
    IndexRebuild.java giving each its own name) against mqstore's from a copy of the same
    log, indexing as the store's own index says: the same number of files, each equal byte
    for byte, in creation order (names are creation times and differ).  4.9.4 writes
    topic#UNIQ_KEY and topic#key per key; 5.5 also topic#T#tags."""
    theirs, ours = store.rebuilt_by_rocketmq, store.rebuilt_by_mqstore
    assert len(theirs) > 1, "RocketMQ's rebuild filled one index file only"
    headers = [[INDEX_HEADER.unpack_from(data, 0) for data in files] for files in (theirs, ours)]
    assert headers[1] == headers[0], "index file headers (begin/end time, begin/end offset, " \
        "slots used, index count): mqstore's, then RocketMQ's"
    differing = [number for number, (a, b) in enumerate(zip(theirs, ours, strict=True))
                 if a != b]
    assert not differing, f"index files {differing} differ past their (equal) headers"


def test_rocketmq_reopens_store_after_mqstore(store: RocketmqStore) -> None:
    load = store.reopened.load
    assert load["ok"] is True, f"RocketMQ refused the store:\n{store.reopened.log[-6000:]}"
    assert load["lastExitOK"] is True, "mqstore's clean close left the abort file"
    expected = by_queue(store.expected)
    for key, views in expected.items():
        queue = store.reopened.queues[key]
        assert queue["problems"] == [], f"getMessage on {key}"
        assert [jvm_view(m) for m in queue["messages"]] == views, f"getMessage {key}"


def test_rocketmq_finds_each_key_once_after_mqstore_opened_twice(store: RocketmqStore,
                                                                 rocketmq: RocketMqJvm) -> None:
    """queryMessage by every key (and on 5.x every tag) of RocketMQ's own corpus, after two
    mqstore opens: each message exactly once ("reopen duplicates index entries")."""
    assert store.reopened.load["ok"] is True, store.reopened.log[-6000:]
    problems = query_mismatches(store.expected, store.reopened.queries,
                                tags=rocketmq.indexes_tags)
    assert not problems, f"{len(problems)} lookups answered wrongly: " + "\n".join(problems[:20])
