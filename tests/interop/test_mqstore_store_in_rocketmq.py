"""Whole-store interop, mqstore -> RocketMQ: Apache RocketMQ's ``DefaultMessageStore`` (4.9.4 and
5.5.0, on the JVM) loads, recovers and serves a whole store directory mqstore wrote.

Two stores per RocketMQ version (the ``mqstore_store`` fixture):

* ``closed``: mqstore's corpus (topics of 1-127 bytes over four queues each, tags, keys,
  UNIQ_KEY, user properties, IPv4/IPv6 born and store hosts, single puts and put_batch) in
  two sessions, then a third that writes nothing; every close clean.
* ``killed``: a writer child killed with kill -9 while the allocator prepared a segment (the
  file still in ``creating/``), after dispatch caught up and the checkpoint covered the last
  put (writer_child.py); the abort file stays.

On each, RocketMQ rebuilds consume queues and index from the commit log alone (the reference
for mqstore's files), then opens the store itself (load + start), reads every queue with
getMessage, queries every key (and on 5.x every tag) with queryMessage and shuts down; then
mqstore opens the store once more.  See whole_store.py for the layout and message counts.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mqstore import storage as mq
from tests.interop.corpus import assert_corpus_is_varied, by_queue, jvm_view
from tests.interop.rocketmq_jvm import ROCKETMQ_VERSIONS, RocketMqJvm, indexes_tags
from tests.interop.store_files import (
    CHECKPOINT_FIELDS,
    CHECKPOINT_NAMES,
    entries_by_offset,
    entry_list,
    first_difference,
    recovery_from_log,
    tag_entries,
    without,
)
from tests.interop.whole_store import (
    MqstoreStore,
    mqstore_store,
    open_with_rocketmq,
    query_mismatches,
)

pytestmark = pytest.mark.interop

TAG_INDEXING_VERSIONS = [v for v in ROCKETMQ_VERSIONS if indexes_tags(v)]


@pytest.fixture(scope="module", params=["closed", "killed"])
def store(request: pytest.FixtureRequest, rocketmq: RocketMqJvm,
          tmp_path_factory: pytest.TempPathFactory) -> MqstoreStore:
    scratch = tmp_path_factory.mktemp(f"mqstore-{request.param}-rocketmq-{rocketmq.version}")
    written = mqstore_store(request.param, scratch / "store")
    open_with_rocketmq(written, rocketmq, scratch)
    return written


def _consume_queue_names(store: MqstoreStore) -> dict[str, list[str]]:
    """"topic/queue id" -> the names of its consume queue files, in order."""
    names: dict[str, list[str]] = {}
    for path in sorted(store.consume_queues):
        topic, queue_id, name = path.rsplit("/", 2)
        names.setdefault(f"{topic}/{queue_id}", []).append(name)
    return names


def loaded(store: MqstoreStore) -> dict[str, Any]:
    assert store.opened is not None
    load = store.opened.load
    assert load["ok"] is True, (f"RocketMQ's DefaultMessageStore.load() refused the store; "
                                f"its log:\n{store.opened.log[-6000:]}")
    return load


# --------------------------------------------------------------------------- load


def test_corpus_is_varied(store: MqstoreStore) -> None:
    assert_corpus_is_varied(store.expected, ipv6_store_host=store.kind == "closed")
    assert len(store.data_segments) > 3, f"only {store.data_segments} hold data"
    assert any(len(names) > 1 for names in _consume_queue_names(store).values()), \
        "no consume queue spans two files"
    assert len(store.index) > 1, "mqstore wrote one index file only"


def test_killed_writer_left_a_segment_being_prepared(store: MqstoreStore) -> None:
    """The precondition of the killed store: the kill came while a segment was prepared, and
    nothing but finished segments is in commitlog/ (RocketMQ's load refuses anything else)."""
    if store.kind == "closed":
        assert store.creating == [], "a clean close left files being prepared"
    else:
        assert [name for name in store.creating if name.startswith("commitlog.")], \
            f"creating/ holds {store.creating}: the kill did not come during a preparation"
    assert all(len(name) == 20 and name.isdigit() for name in store.segments), store.segments


def test_rocketmq_loads_every_file(store: MqstoreStore) -> None:
    load = loaded(store)
    assert load["lastExitOK"] is (store.kind == "closed")
    assert load["commitLogFiles"] == [s for s in store.segments if s in load["commitLogFiles"]]
    assert set(store.data_segments) <= set(load["commitLogFiles"]), "segments with data refused"
    assert load["maxPhyOffset"] == store.end_position
    ours_queues = _consume_queue_names(store)
    assert ours_queues == {
        k: v for k, v in load["consumeQueueFiles"].items() if k in ours_queues}
    assert sorted(load["indexFiles"]) == [f.name for f in store.index]
    # Nothing with data was deleted or resized; only empty segments made ahead may go.
    for path, size in store.files.items():
        if path not in store.files_after:
            assert path.startswith("commitlog/") and Path(path).name in store.empty_segments, \
                f"RocketMQ deleted {path}"
        else:
            assert store.files_after[path] == size, f"RocketMQ resized {path}"


# --------------------------------------------------------------------------- reads


def test_rocketmq_get_message_returns_what_mqstore_wrote(store: MqstoreStore) -> None:
    loaded(store)
    assert store.opened is not None
    expected = by_queue(store.expected)
    # RocketMQ makes empty queues of its own (SCHEDULE_TOPIC_XXXX, for delay levels).
    extra = {key: len(q["messages"]) for key, q in store.opened.queues.items()
             if key not in expected and q["messages"]}
    assert not extra, f"RocketMQ found messages in queues mqstore never wrote: {extra}"
    for key, views in expected.items():
        queue = store.opened.queues[key]
        assert queue["problems"] == [], f"getMessage on {key}"
        assert queue["statusAtMax"] == "OFFSET_OVERFLOW_ONE", key
        got = [jvm_view(m) for m in queue["messages"]]
        assert [g["physical_offset"] for g in got] == [v["physical_offset"] for v in views], key
        for index, (g, want) in enumerate(zip(got, views, strict=True)):
            assert g == want, f"getMessage {key} offset {index}"


def test_rocketmq_min_max_offsets_agree_with_mqstore(store: MqstoreStore) -> None:
    loaded(store)
    assert store.opened is not None
    got = {key: (q["minOffset"], q["maxOffset"]) for key, q in store.opened.queues.items()
           if key in store.offsets}
    want = {key: (0, len(views)) for key, views in by_queue(store.expected).items()}
    assert store.offsets == want, "mqstore's own min/max offsets"
    assert got == want


def _crash_boundary(store: MqstoreStore) -> int | None:
    """After a kill, the one message RocketMQ's own recovery may index twice: the one at
    the newest index file's end offset (query_mismatches)."""
    return store.index[-1].end_physical_offset if store.kind == "killed" else None


def test_rocketmq_finds_each_key_once(store: MqstoreStore) -> None:
    """queryMessage by every KEYS entry and UNIQ_KEY returns each of its messages exactly once
    (an index entry written twice, e.g. at a reopening, makes RocketMQ return it twice)."""
    loaded(store)
    assert store.opened is not None
    keys = [a for a in store.opened.queries if a["kind"] == "key"]
    problems = query_mismatches(store.expected, keys, tags=False,
                                boundary_offset=_crash_boundary(store))
    assert not problems, f"{len(problems)} keys answered wrongly: " + "\n".join(problems[:20])


@pytest.mark.parametrize("rocketmq", TAG_INDEXING_VERSIONS, indirect=True,
                         ids=lambda v: f"rocketmq-{v}")
def test_rocketmq_5_finds_each_tag_once(store: MqstoreStore) -> None:
    """RocketMQ 5's IndexService.buildIndex also indexes each message's whole TAGS property as
    "topic#T#tags"; queryMessage(..., INDEX_TAG_TYPE) must find every tagged message once."""
    loaded(store)
    assert store.opened is not None
    problems = query_mismatches(store.expected, store.opened.queries, tags=True,
                                boundary_offset=_crash_boundary(store))
    tag_problems = [p for p in problems if p.startswith("('tag'")]
    assert not tag_problems, (f"{len(tag_problems)} tags answered wrongly: "
                              + "\n".join(tag_problems[:20]))


# --------------------------------------------------------------------------- side files


def test_consume_queues_identical_to_rocketmq_rebuild(store: MqstoreStore) -> None:
    assert store.rebuilt.get("load") is True, store.rebuilt
    ours, theirs = store.consume_queues, store.rebuilt_consume_queues
    assert sorted(ours) == sorted(theirs), "consume queue files differ in name"
    differing = {path: first_difference(ours[path], theirs[path])
                 for path in ours if ours[path] != theirs[path]}
    assert not differing, f"{len(differing)} files differ: {dict(list(differing.items())[:5])}"


def test_index_entries_identical_to_rocketmq_rebuild(store: MqstoreStore) -> None:
    """The (key hash, physical offset) of every index entry, in order, over all of mqstore's
    index files, against RocketMQ's rebuild from the same commit log; and the bounds.

    Against 4.9.x, mqstore's tag entries ("topic#T#tags", which RocketMQ 5 writes and 4.9.x
    never looks up) are left out: one store format serves both versions."""
    assert store.rebuilt.get("load") is True, store.rebuilt
    ours = entry_list(store.index)
    theirs = entry_list(store.rebuilt_index)
    if not indexes_tags(store.rocketmq_version):
        ours = without(ours, tag_entries([(v["topic"], v["tags"], v["physical_offset"])
                                          for v in store.expected]))
    if ours != theirs:
        mine, rebuilt = Counter(ours), Counter(theirs)
        twice = {o: hs for o, hs in entries_by_offset(store.index).items()
                 if len(hs) > len(set(hs))}
        pytest.fail(f"mqstore's index has {len(ours)} entries, RocketMQ's rebuild "
                    f"{len(theirs)}; missing {list((rebuilt - mine).items())[:10]}, extra "
                    f"{list((mine - rebuilt).items())[:10]}; offsets indexed twice with the "
                    f"same key: {dict(list(twice.items())[:5])}")
    assert ours[0][1] == store.rebuilt_index[0].begin_physical_offset
    assert ours[-1][1] == store.rebuilt_index[-1].end_physical_offset
    if indexes_tags(store.rocketmq_version):
        first, last, rebuilt = store.index[0], store.index[-1], store.rebuilt_index[0]
        assert (first.begin_timestamp, first.begin_physical_offset) == (
            rebuilt.begin_timestamp, rebuilt.begin_physical_offset)
        assert (last.end_timestamp, last.end_physical_offset) == (
            rebuilt.end_timestamp, rebuilt.end_physical_offset)


def test_index_headers_describe_their_entries(store: MqstoreStore) -> None:
    """Each index file's header as RocketMQ's IndexFile keeps it: begin/end offset and store
    time of its first/last entry's message, slots in use, and the next entry number."""
    stored_ms = {v["physical_offset"]: v["store_timestamp_ms"] for v in store.expected}
    for file in [*store.index, *store.rebuilt_index]:
        assert file.entries, f"index file {file.name} is empty"
        first, last = file.entries[0][1], file.entries[-1][1]
        slots = range(0, len(file.slots), 4)
        used = sum(1 for at in slots if file.slots[at:at + 4] != bytes(4))
        assert file.header == (stored_ms[first], stored_ms[last], first, last, used,
                               len(file.entries) + 1), f"index file {file.name}"


# --------------------------------------------------------------------------- checkpoint


def test_rocketmq_reads_mqstore_checkpoint_and_recovers_without_full_scan(
        store: MqstoreStore) -> None:
    load = loaded(store)
    assert store.opened is not None
    fields = dict(zip(CHECKPOINT_NAMES, CHECKPOINT_FIELDS.unpack_from(store.checkpoint),
                      strict=True))
    as_read = load["checkpoint"]
    assert (as_read["physicMsgTimestamp"], as_read["logicsMsgTimestamp"],
            as_read["indexMsgTimestamp"]) == (fields["physic_msg_timestamp"],
                                              fields["logics_msg_timestamp"],
                                              fields["index_msg_timestamp"])
    last_ms = max(v["store_timestamp_ms"] for v in store.expected)
    if store.kind == "closed":
        assert fields["physic_msg_timestamp"] == fields["logics_msg_timestamp"] == last_ms
    assert len(store.data_segments) > 3, "too few segments for the recovery start to tell"
    recovery = recovery_from_log(store.opened.log, load["commitLogFiles"])
    assert recovery.normal is (store.kind == "closed")
    assert recovery.start_file != store.segments[0], (
        f"RocketMQ recovered from the first segment (a full recovery) with mqstore's "
        f"checkpoint {fields}")
    if not recovery.normal:
        # The segment it started at is one the checkpoint says was safe: 4.9.x compares its
        # first message's store time with min(log, queue time) - 3 s; 5.5 (with no queue
        # offset at byte 40, as mqstore writes) with the queue time.
        # (5.x also stops looking after commitLogRecoverMaxNum = 10 files, whatever they hold.)
        first_ms = min(v["store_timestamp_ms"] for v in store.expected
                       if v["physical_offset"] >= int(recovery.start_file))
        safe_ms = (as_read["minTimestamp"] if store.rocketmq_version.startswith("4.")
                   else as_read["logicsMsgTimestamp"])
        files = load["commitLogFiles"]
        capped = (not store.rocketmq_version.startswith("4.")
                  and files.index(recovery.start_file) == len(files) - 10)
        assert capped or first_ms <= safe_ms, (recovery, first_ms, as_read)


def test_mqstore_recovers_normally_after_rocketmq_rewrote_the_checkpoint(
        store: MqstoreStore) -> None:
    loaded(store)
    assert store.opened is not None and store.opened.summary is not None
    assert store.opened.summary["abortAfterShutdown"] is False, "RocketMQ did not shut down"
    assert store.reopen is not None
    changed = [name for name, a, b in zip(
        CHECKPOINT_NAMES, CHECKPOINT_FIELDS.unpack_from(store.checkpoint),
        CHECKPOINT_FIELDS.unpack_from(store.checkpoint_after), strict=True) if a != b]
    assert store.reopen.mode is mq.RecoveryMode.NORMAL, (
        f"mqstore ran a {store.reopen.mode.value} recovery of a store RocketMQ shut down "
        f"cleanly; RocketMQ changed the checkpoint's {changed or 'nothing'} "
        f"(bytes 0-47), trailer {store.checkpoint_after[4088:].hex()}")
