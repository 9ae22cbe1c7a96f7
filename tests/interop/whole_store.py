"""Scenarios of the whole-store interop tests: one store written by one side and opened by the
other, run once per (RocketMQ version, scenario) and then judged by many small tests.

Message counts come from the environment (defaults keep the interop suite a few minutes on
two cores): MQSTORE_INTEROP_MESSAGES (mqstore's corpus, default 400),
MQSTORE_INTEROP_KILLED_MESSAGES (the killed writer's, default 300) and
MQSTORE_INTEROP_ROCKETMQ_MESSAGES (RocketMQ's, default 300).
"""

from __future__ import annotations

import dataclasses
import json
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqstore import storage as mq
from mqstore.storage.dispatch.tag_evidence import index_tags_for_store
from tests.interop.corpus import (
    Query,
    View,
    by_queue,
    duplicates,
    hit_matches,
    index_queries,
    jvm_view,
    mqstore_view,
    outgoing_corpus,
    put_corpus,
    read_every_queue,
    store_config,
    view_from_json,
)
from tests.interop.rocketmq_jvm import Layout, Opened, RocketMqJvm
from tests.interop.store_files import (
    IndexFile,
    all_zero,
    consume_queue_files,
    file_digests,
    index_file_bytes,
    index_files,
    listing,
)
from tests.processes import module_command

LAYOUT = Layout(segment_bytes=256 * 1024, consume_queue_file_bytes=8 * 20,
                index_hash_slots=512, index_count_max=400, query_max=512)
"""Small files so that a few hundred messages cross every kind of file boundary: ~9 commit log
segments, consume queues of 8 entries a file (most queues span two or more), index files of
399 entries (mqstore's corpus fills three)."""

REBUILD_LAYOUT = LAYOUT.replace(index_count_max=1 << 16)
"""RocketMQ's rebuild indexes the whole log in one file: it names index files by the
millisecond they are created in, and a recovery dispatching a whole log can fill several in
one millisecond (they would share a name)."""

IPV6_STORE_HOST = "[2001:db8::77]:10911"


def _count(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


MQSTORE_MESSAGES = _count("MQSTORE_INTEROP_MESSAGES", 400)
KILLED_MESSAGES = _count("MQSTORE_INTEROP_KILLED_MESSAGES", 300)
ROCKETMQ_MESSAGES = _count("MQSTORE_INTEROP_ROCKETMQ_MESSAGES", 300)
KILL_GAP_S = 3.5
"""Pause of the killed writer after two thirds of its corpus: more than RocketMQ's 3 s margin
on checkpoint times, so that its abnormal recovery has a safe segment after the first."""


# --------------------------------------------------------------------------- mqstore -> RocketMQ


@dataclass
class MqstoreStore:
    """A store mqstore wrote, as it was before RocketMQ opened it, and what RocketMQ made of it."""

    kind: str
    """"closed": three clean sessions; "killed": a writer killed with kill -9."""
    directory: Path
    expected: list[View]
    files: dict[str, int]
    """commitlog/, consumequeue/, index/ before RocketMQ opened the store: path -> size."""
    empty_segments: set[str]
    consume_queues: dict[str, bytes]
    index: list[IndexFile]
    checkpoint: bytes
    offsets: dict[tuple[str, int], tuple[int, int]]
    """mqstore's (min, max) offset of each queue."""
    end_position: int
    creating: list[str]
    """What <store>/creating/ held when RocketMQ opened the store."""
    rebuilt: dict[str, Any] = field(default_factory=dict)
    rebuilt_consume_queues: dict[str, bytes] = field(default_factory=dict)
    rebuilt_index: list[IndexFile] = field(default_factory=list)
    opened: Opened | None = None
    checkpoint_after: bytes = b""
    files_after: dict[str, int] = field(default_factory=dict)
    reopen: mq.RecoveryReport | None = None
    rocketmq_version: str = ""

    @property
    def segments(self) -> list[str]:
        return sorted(Path(p).name for p in self.files if p.startswith("commitlog/"))

    @property
    def data_segments(self) -> list[str]:
        return [name for name in self.segments if name not in self.empty_segments]

    @property
    def by_offset(self) -> dict[int, View]:
        return {view["physical_offset"]: view for view in self.expected}


def write_in_sessions(directory: Path, count: int) -> list[View]:
    """mqstore's corpus in two sessions (the second with an IPv6 store host and put_batch),
    then a third that writes nothing: RocketMQ must see no trace of the reopenings."""
    corpus = outgoing_corpus(count)
    half = count // 2
    queue_offsets: Counter[tuple[str, int]] = Counter()
    expected = put_corpus(directory, corpus[:half], store_config(LAYOUT),
                          queue_offsets=queue_offsets)
    expected += put_corpus(directory, corpus[half:],
                           store_config(LAYOUT, store_host=IPV6_STORE_HOST), batch=4,
                           queue_offsets=queue_offsets)
    return expected


def write_and_kill(directory: Path, count: int) -> tuple[list[View], dict[str, Any]]:
    """Run writer_child.py, read its acknowledged puts until it is ready, kill -9 it."""
    directory.mkdir(parents=True)
    layout = json.dumps(dataclasses.asdict(LAYOUT))
    argv = [*module_command("tests.interop.writer_child"), str(directory), layout, str(count),
            str(count * 2 // 3), str(KILL_GAP_S)]
    stderr_path = directory.with_name(directory.name + ".stderr")
    with open(stderr_path, "w") as stderr:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True)
    expected: list[View] = []
    ready: dict[str, Any] | None = None
    try:
        assert child.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(child.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + 120
            while ready is None and time.monotonic() < deadline:
                if not selector.select(timeout=1):
                    continue
                line = child.stdout.readline()
                if not line:
                    break
                obj = json.loads(line)
                if "put" in obj:
                    expected.append(view_from_json(obj["put"]))
                else:
                    ready = obj["ready"]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert ready is not None, (f"writer_child was not ready (exit {child.returncode}):\n"
                               f"{stderr_path.read_text()[-4000:]}")
    return expected, ready


def mqstore_store(kind: str, directory: Path) -> MqstoreStore:
    """Write the store (and close, or kill); after a close, open it once more as a reader that
    writes nothing.  Then record everything RocketMQ must agree with."""
    if kind == "closed":
        expected = write_in_sessions(directory, MQSTORE_MESSAGES)
        offsets: dict[tuple[str, int], tuple[int, int]] = {}
        with mq.MessageStore.open(directory, store_config(LAYOUT)) as store:
            for topic, queue_id in by_queue(expected):
                offsets[topic, queue_id] = (store.min_offset(topic, queue_id),
                                            store.max_offset(topic, queue_id))
            end_position = store.committed_position
    else:  # left exactly as the kill left it, for RocketMQ
        expected, _ = write_and_kill(directory, KILLED_MESSAGES)
        last = max(expected, key=lambda v: v["physical_offset"])
        end_position = last["physical_offset"] + last["total_size"]
        offsets = {key: (0, len(views)) for key, views in by_queue(expected).items()}
    files = listing(directory)
    return MqstoreStore(
        kind=kind, directory=directory, expected=expected, files=files,
        empty_segments={Path(p).name for p in files
                        if p.startswith("commitlog/") and all_zero(directory / p)},
        consume_queues=consume_queue_files(directory),
        index=index_files(directory, hash_slots=LAYOUT.index_hash_slots),
        checkpoint=(directory / "checkpoint").read_bytes(), offsets=offsets,
        end_position=end_position,
        creating=sorted(p.name for p in (directory / "creating").glob("*")))


def open_with_rocketmq(store: MqstoreStore, rocketmq: RocketMqJvm, scratch: Path) -> None:
    """RocketMQ's rebuild from the commit log alone, then RocketMQ on the store itself, then
    mqstore once more on what RocketMQ left."""
    rebuilt = scratch / "rebuilt"
    store.rocketmq_version = rocketmq.version
    store.rebuilt = rocketmq.rebuild(store.directory, rebuilt, REBUILD_LAYOUT)
    store.rebuilt_consume_queues = consume_queue_files(rebuilt)
    store.rebuilt_index = index_files(rebuilt, hash_slots=REBUILD_LAYOUT.index_hash_slots)
    queries = [("queue", topic, str(queue_id)) for topic, queue_id in by_queue(store.expected)]
    store.opened = rocketmq.open_store(store.directory, [*queries, *rocketmq_queries(
        store.expected, rocketmq)], LAYOUT)
    store.checkpoint_after = (store.directory / "checkpoint").read_bytes()
    store.files_after = listing(store.directory)
    with mq.MessageStore.open(store.directory, store_config(LAYOUT)) as reopened:
        store.reopen = reopened.recovery_report


def rocketmq_queries(expected: list[View], rocketmq: RocketMqJvm) -> list[Query]:
    return list(index_queries(expected, tags=rocketmq.indexes_tags))


def query_mismatches(expected: list[View], answers: list[dict[str, Any]], *,
                     tags: bool, boundary_offset: int | None = None) -> list[str]:
    """Each RocketMQ queryMessage answer against the messages it must find exactly once.

    `boundary_offset`: after a crash RocketMQ's recovery dispatches again the message at the
    newest index file's end offset, and its `buildIndex` skips only offsets *below* that end
    (it does the same on its own crashed store), so that one message may come back twice."""
    wanted = index_queries(expected, tags=tags)
    got = {(a["kind"], a["topic"], a["key"]): a["results"] for a in answers}
    problems = []
    for query, offsets in wanted.items():
        if query not in got:
            problems.append(f"{query}: not asked")
            continue
        found = [hit["physicalOffset"] for hit in got[query] if hit_matches(query, hit)]
        if boundary_offset is not None and found.count(boundary_offset) == 2:
            found.remove(boundary_offset)
        if sorted(found) != sorted(offsets):
            problems.append(f"{query}: expected {sorted(offsets)}, got {sorted(found)}"
                            + (f" (duplicates {duplicates(found)})" if duplicates(found) else ""))
    return problems


# --------------------------------------------------------------------------- RocketMQ -> mqstore


@dataclass
class MqstoreReads:
    """What mqstore read from a store RocketMQ wrote, in one open."""

    recovery: mq.RecoveryReport
    queues: dict[tuple[str, int], tuple[list[View], str]]
    by_offset: dict[int, View]
    iterated: list[int]
    keys: dict[Query, list[int]]
    offsets: dict[tuple[str, int], tuple[int, int]]


@dataclass
class RocketmqStore:
    """A store RocketMQ wrote, what mqstore read from it (twice), and RocketMQ on it again."""

    kind: str
    """"shutdown": RocketMQ shut down cleanly; "crashed": it halted without shutdown."""
    directory: Path
    expected: list[View]
    consume_queues: dict[str, bytes]
    index: list[IndexFile]
    reads: MqstoreReads
    second_recovery: mq.RecoveryReport
    consume_queues_after: dict[str, bytes]
    index_after: list[IndexFile]
    reopened: Opened
    digests: dict[str, str]
    """sha256 of every file of commitlog/, consumequeue/ and index/ as RocketMQ left them."""
    digests_after: dict[str, str]
    """The same after mqstore's two opens and closes."""
    rebuilt_by_rocketmq: list[bytes]
    """RocketMQ's index files rebuilt from this commit log alone (`rebuild_index_files`)."""
    rebuilt_by_mqstore: list[bytes]
    """mqstore's, from a copy of the same commit log, indexing as the store's index says."""


def read_with_mqstore(directory: Path, expected: list[View]) -> MqstoreReads:
    """Open the store with mqstore, read every message every way it offers, close."""
    with mq.MessageStore.open(directory, store_config(LAYOUT)) as store:
        queues = by_queue(expected)
        return MqstoreReads(
            recovery=store.recovery_report,
            queues=read_every_queue(store, queues),
            by_offset={v["physical_offset"]: mqstore_view(store.message_at(v["physical_offset"]))
                       for v in expected},
            iterated=[m.physical_offset for m in store.iter_messages()],
            keys={query: [m.physical_offset for m in store.query_by_key(
                query[1], query[2], max_messages=LAYOUT.query_max)]
                for query in index_queries(expected, tags=False)},
            offsets={key: (store.min_offset(*key), store.max_offset(*key)) for key in queues})


def rebuild_index_both_ways(rocketmq: RocketMqJvm, directory: Path) -> tuple[list[bytes],
                                                                            list[bytes]]:
    """The index files RocketMQ and mqstore build from `directory`'s commit log alone, each in
    a scratch copy, with LAYOUT's small files (several of them).  mqstore is told what the
    store's own index holds (`index_tags_for_store`), as the reindex job is for its output."""
    theirs = directory.with_name(directory.name + "-rebuilt-by-rocketmq")
    rebuilt = rocketmq.rebuild_index_files(directory, theirs, LAYOUT)
    assert rebuilt.get("load") is True, rebuilt
    ours = directory.with_name(directory.name + "-rebuilt-by-mqstore")
    shutil.copytree(directory / "commitlog", ours / "commitlog")
    tags = index_tags_for_store(directory, store_config(LAYOUT))
    with mq.MessageStore.open(ours, store_config(LAYOUT, index_tags_enabled=tags)):
        pass
    return index_file_bytes(theirs), index_file_bytes(ours)


def rocketmq_store(kind: str, rocketmq: RocketMqJvm, directory: Path) -> RocketmqStore:
    written = rocketmq.write(directory, ROCKETMQ_MESSAGES, LAYOUT, crash=kind == "crashed")
    expected = [jvm_view(w) for w in written]
    before = {"consume_queues": consume_queue_files(directory),
              "index": index_files(directory, hash_slots=LAYOUT.index_hash_slots),
              "digests": file_digests(directory)}
    rebuilt_by_rocketmq, rebuilt_by_mqstore = rebuild_index_both_ways(rocketmq, directory)
    reads = read_with_mqstore(directory, expected)
    with mq.MessageStore.open(directory, store_config(LAYOUT)) as store:
        second_recovery = store.recovery_report
    digests_after = file_digests(directory)
    consume_queues_after = consume_queue_files(directory)
    index_after = index_files(directory, hash_slots=LAYOUT.index_hash_slots)
    queries = [("queue", topic, str(queue_id)) for topic, queue_id in by_queue(expected)]
    reopened = rocketmq.open_store(directory, [*queries, *rocketmq_queries(expected, rocketmq)],
                                   LAYOUT)
    return RocketmqStore(kind=kind, directory=directory, expected=expected, reads=reads,
                         second_recovery=second_recovery,
                         consume_queues_after=consume_queues_after, index_after=index_after,
                         reopened=reopened, digests_after=digests_after,
                         rebuilt_by_rocketmq=rebuilt_by_rocketmq,
                         rebuilt_by_mqstore=rebuilt_by_mqstore, **before)
