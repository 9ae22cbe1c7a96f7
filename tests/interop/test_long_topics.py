"""A RocketMQ 5.5 store with topics of 128, 200 and 255 bytes, served by mqstore's services.

RocketMQ 5 stores a topic longer than 127 bytes in its V2 record (magic 0xDAA320AB, a 2-byte
topic length; `autoMessageVersionOnTopicLen`, see the harness's Compat for 5.x), and allows
255 bytes (%RETRY%/%DLQ% topics).  RocketMQ's `DefaultMessageStore` writes such a store and
shuts down; then mqstore's writer, indexer and notifier run as processes on that directory
with `topic_size_bytes_max: 255`:

* the notifier serves every message of every long-topic queue, and finds each key;
* the writer takes more messages for the 255-byte topic (ten to one queue: they need a new
  consume queue file, whose name in creating/ was 300 bytes long before issue 26's fix, so
  dispatch stopped for every topic), the indexer dispatches them, the notifier serves them;
* RocketMQ opens the store again and reads those V2 records mqstore wrote.

The engine (`MessageStore.open`, `get`, `query_by_key`) reads a pristine copy of the same
store.  About 40 s on two cores: three JVM runs, three services.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqstore import storage as mq
from mqstore.storage.format.record import TOPIC_LENGTH_V1_MAX
from mqstore.storage.format.topic import LEGAL_TOPIC_CHARACTERS
from tests.integration.three_services import ThreeServices
from tests.interop.corpus import (
    View,
    body_digest,
    by_queue,
    index_queries,
    jvm_view,
    read_every_queue,
    store_config,
)
from tests.interop.http_calls import http_json, quoted
from tests.interop.rocketmq_jvm import ROCKETMQ_550, Layout, Opened, RocketMqJvm

pytestmark = pytest.mark.interop

LAYOUT = Layout(segment_bytes=256 * 1024, consume_queue_file_bytes=8 * 20,
                index_hash_slots=512, index_count_max=400, query_max=512)
"""Small files, as in the whole-store tests: consume queue files of 8 entries, index files of
399, commit log segments of 256 KiB."""
TOPIC_LENGTHS = (128, 200, 255)
MESSAGES = 72
"""Six messages a queue: three topics of four queues each (the harness puts message i on
topic i % 3 and queue (i / 8) % 4), over a few commit log segments and consume queue files."""
MAGIC_V2 = 0xDAA320AB
PRODUCED = 10
"""More than a consume queue file holds (LAYOUT: 8 entries), so dispatching them needs a
new consume queue file of the 255-byte topic."""
PRODUCED_QUEUE = 0
DISPATCH_WAIT_S = 15.0
CONFIG = store_config(LAYOUT, topic_size_bytes_max=255)


def _expected_view(view: View) -> View:
    """jvm_view for RocketMQ's write report, which leaves out the magic: V2 past 127 bytes."""
    if len(view["topic"].encode()) > TOPIC_LENGTH_V1_MAX:
        return {**view, "magic": MAGIC_V2}
    return view


@dataclass
class LongTopicStore:
    directory: Path
    pristine: Path
    """A copy of the store as RocketMQ left it, for the engine's reads."""
    expected: list[View]

    @property
    def longest_topic(self) -> str:
        topic: str = next(v["topic"] for v in self.expected if len(v["topic"]) == 255)
        return topic


@pytest.fixture(scope="module")
def rocketmq5() -> RocketMqJvm:
    return RocketMqJvm.build(ROCKETMQ_550)


@pytest.fixture(scope="module")
def long_store(rocketmq5: RocketMqJvm, tmp_path_factory: pytest.TempPathFactory
               ) -> LongTopicStore:
    scratch = tmp_path_factory.mktemp("rocketmq-long-topics")
    directory = scratch / "store"
    written = rocketmq5.write(directory, MESSAGES, LAYOUT, topic_lengths=TOPIC_LENGTHS)
    pristine = scratch / "pristine"
    shutil.copytree(directory, pristine)
    return LongTopicStore(directory, pristine, [_expected_view(jvm_view(w)) for w in written])


# --------------------------------------------------------------------------- the engine


def test_rocketmq_wrote_v2_records_for_every_long_topic(long_store: LongTopicStore) -> None:
    """The harness itself: the three lengths, every allowed character, four queues each."""
    topics = {v["topic"] for v in long_store.expected}
    assert sorted(len(topic.encode()) for topic in topics) == list(TOPIC_LENGTHS)
    assert set(long_store.longest_topic) == set(LEGAL_TOPIC_CHARACTERS)
    assert {(len(t), q) for t, q in by_queue(long_store.expected)} == {
        (length, queue_id) for length in TOPIC_LENGTHS for queue_id in range(4)}
    for topic in topics:
        assert (long_store.directory / "consumequeue" / topic).is_dir(), topic[:40]


def test_the_engine_reads_and_finds_rocketmq_long_topics(long_store: LongTopicStore) -> None:
    """`get` returns each V2 record as RocketMQ reported it (magic, size, topic, body ...),
    and `query_by_key` finds every key and UNIQ_KEY of the long topics; then ten puts to the
    255-byte topic are dispatched (into a new consume queue file) and read back."""
    queues = by_queue(long_store.expected)
    longest, start = long_store.longest_topic, len(queues[long_store.longest_topic, 0])
    with mq.MessageStore.open(long_store.pristine, CONFIG) as store:
        read = read_every_queue(store, queues)
        keys = {query: sorted(m.physical_offset for m in store.query_by_key(
            query[1], query[2], max_messages=LAYOUT.query_max))
            for query in index_queries(long_store.expected, tags=False)}
        puts = [store.put(mq.Message(longest, 0, b"engine-%d" % number, keys=(f"e-{number}",)))
                for number in range(PRODUCED)]
        assert [put.queue_offset for put in puts] == list(range(start, start + PRODUCED))
        assert store.wait_dispatched(timeout_ms=int(DISPATCH_WAIT_S * 1000))
        added = read_every_queue(store, [(longest, 0)])[longest, 0][0][start:]
        assert [(v["body"], v["magic"]) for v in added] == [
            (body_digest(b"engine-%d" % number), MAGIC_V2) for number in range(PRODUCED)]
        assert [m.queue_offset for m in store.query_by_key(longest, "e-9")] == [start + 9]
    for key, views in queues.items():
        got, status = read[key]
        assert status == "OFFSET_OVERFLOW_ONE", (len(key[0]), key[1], status)
        assert got == views, (len(key[0]), key[1])
    wanted = index_queries(long_store.expected, tags=False)
    assert len(wanted) > MESSAGES
    assert keys == {query: sorted(offsets) for query, offsets in wanted.items()}


# --------------------------------------------------------------------------- the services


@dataclass
class Served:
    """What mqstore's three services answered on the RocketMQ store, then RocketMQ again."""

    pulled: dict[tuple[str, int], list[dict[str, Any]]]
    end_statuses: dict[tuple[str, int], str]
    found: dict[tuple[str, str, str], list[int]]
    produced: list[dict[str, Any]]
    """The writer's answers to the puts to the 255-byte topic."""
    produced_pulled: list[dict[str, Any]]
    produced_found: dict[str, list[int]]
    indexer_status: dict[str, Any]
    exit_codes: dict[str, int]
    reopened: Opened


def _service_store_settings() -> dict[str, Any]:
    """CONFIG's fields that differ from the defaults, as the config file's store section."""
    defaults = mq.StoreConfig()
    return {field.name: getattr(CONFIG, field.name) for field in dataclasses.fields(CONFIG)
            if getattr(CONFIG, field.name) != getattr(defaults, field.name)}


def _pull_all(notifier: str, topic: str, queue_id: int, offset: int, *,
              count_min: int = 0) -> tuple[list[dict[str, Any]], str]:
    """Every message of one queue from `offset` on; with `count_min`, wait up to
    DISPATCH_WAIT_S for that many (they are served once dispatched)."""
    url = f"{notifier}/v1/topics/{quoted(topic)}/queues/{queue_id}/messages"
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + DISPATCH_WAIT_S
    while True:
        wait_ms = 1000 if len(messages) < count_min else 0
        answer = http_json("GET", f"{url}?offset={offset}&max_messages=32&wait_ms={wait_ms}")
        messages += answer["messages"]
        if answer["status"] == "FOUND":
            offset = answer["next_offset"]
        elif len(messages) >= count_min or time.monotonic() > deadline:
            return messages, answer["status"]


def _find(notifier: str, topic: str, key: str) -> list[int]:
    answer = http_json("GET", f"{notifier}/v1/topics/{quoted(topic)}/messages?key="
                          f"{urllib.parse.quote(key, safe='')}&max_messages={LAYOUT.query_max}")
    return sorted(m["physical_offset"] for m in answer["messages"])


def _serve(store: LongTopicStore, tmp_path: Path) -> dict[str, Any]:
    services = ThreeServices(tmp_path, store.directory)
    services.config.write_text(json.dumps({"data_dir": str(store.directory),
                                           "store": _service_store_settings()}))
    queues = by_queue(store.expected)
    answers: dict[str, Any] = {"pulled": {}, "end_statuses": {}}
    try:
        for name in ("indexer", "writer", "notifier"):
            services.start(name)
        notifier, writer = services.url("notifier"), services.url("writer")
        for topic, queue_id in queues:
            pulled, status = _pull_all(notifier, topic, queue_id, 0)
            answers["pulled"][topic, queue_id] = pulled
            answers["end_statuses"][topic, queue_id] = status
        answers["found"] = {query: _find(notifier, query[1], query[2])
                            for query in index_queries(store.expected, tags=False)}
        longest = store.longest_topic
        answers["produced"] = [http_json("POST", f"{writer}/v1/topics/{quoted(longest)}/messages", {
            "body": f"from-mqstore-{number}", "keys": [f"mq-key-{number}"],
            "tags": "from-mqstore", "queue_id": PRODUCED_QUEUE}) for number in range(PRODUCED)]
        start = len(queues[longest, PRODUCED_QUEUE])
        answers["produced_pulled"], _ = _pull_all(notifier, longest, PRODUCED_QUEUE, start,
                                                  count_min=PRODUCED)
        answers["produced_found"] = {f"mq-key-{number}": _find(notifier, longest,
                                                                f"mq-key-{number}")
                                     for number in range(PRODUCED)}
        try:
            answers["indexer_status"] = http_json("GET", f"{services.url('indexer')}/v1/status")
        except urllib.error.URLError as error:  # the indexer stopped: judged by the tests
            answers["indexer_status"] = {"unreachable": repr(error),
                                         "log": services.log_tail("indexer")}
    finally:
        answers["exit_codes"] = services.stop_all()
    return answers


@pytest.fixture(scope="module")
def served(long_store: LongTopicStore, rocketmq5: RocketMqJvm,
           tmp_path_factory: pytest.TempPathFactory) -> Served:
    answers = _serve(long_store, tmp_path_factory.mktemp("services"))
    queries: list[tuple[str, ...]] = [("queue", topic, str(queue_id))
                                      for topic, queue_id in by_queue(long_store.expected)]
    queries += [("key", long_store.longest_topic, f"mq-key-{number}")
                for number in range(PRODUCED)]
    reopened = rocketmq5.open_store(long_store.directory, queries, LAYOUT)
    return Served(reopened=reopened, **answers)


def _as_view_fields(message: dict[str, Any]) -> dict[str, Any]:
    """The fields of a notifier message that a View also has, under View names."""
    return {"topic": message["topic"], "queue_id": message["queue_id"],
            "queue_offset": message["queue_offset"],
            "physical_offset": message["physical_offset"], "msg_id": message["msg_id"],
            "store_timestamp_ms": message["store_timestamp_ms"],
            "born_timestamp_ms": message["born_timestamp_ms"], "tags": message["tags"],
            "keys": tuple(message["keys"]), "properties": message["properties"],
            "body": body_digest(base64.b64decode(message["body_base64"]))}


def _view_fields(view: View) -> dict[str, Any]:
    properties = {name: value for name, value in view["properties"].items()
                  if name not in ("TAGS", "KEYS")}
    return {**{name: view[name] for name in (
        "topic", "queue_id", "queue_offset", "physical_offset", "msg_id", "store_timestamp_ms",
        "born_timestamp_ms", "tags", "keys", "body")}, "properties": properties}


def test_the_notifier_serves_every_message_of_the_long_topics(long_store: LongTopicStore,
                                                              served: Served) -> None:
    for key, views in by_queue(long_store.expected).items():
        assert served.end_statuses[key] == "OFFSET_OVERFLOW_ONE", (len(key[0]), key[1])
        assert [_as_view_fields(m) for m in served.pulled[key]] == \
            [_view_fields(v) for v in views], (len(key[0]), key[1])


def test_the_notifier_finds_every_key_of_the_long_topics(long_store: LongTopicStore,
                                                         served: Served) -> None:
    wanted = index_queries(long_store.expected, tags=False)
    assert {query for query in wanted if len(query[1]) == 255}, "no key of the 255-byte topic"
    assert served.found == {query: sorted(offsets) for query, offsets in wanted.items()}


def test_the_writer_takes_the_255_byte_topic_and_the_notifier_serves_it(
        long_store: LongTopicStore, served: Served) -> None:
    """Ten puts after RocketMQ's messages of the queue, dispatched into a new consume queue
    file, pulled and found by key; no queue stalled."""
    start = len(by_queue(long_store.expected)[long_store.longest_topic, PRODUCED_QUEUE])
    assert [p["status"] for p in served.produced] == ["PUT_OK"] * PRODUCED
    assert [p["queue_offset"] for p in served.produced] == list(range(start, start + PRODUCED))
    assert [(m["topic"], m["queue_offset"], base64.b64decode(m["body_base64"]), m["keys"])
            for m in served.produced_pulled] == [
        (long_store.longest_topic, start + number, f"from-mqstore-{number}".encode(),
         [f"mq-key-{number}"]) for number in range(PRODUCED)]
    assert served.produced_found == {f"mq-key-{number}": [served.produced[number][
        "physical_offset"]] for number in range(PRODUCED)}
    status = served.indexer_status
    assert (status.get("failure"), status.get("stalled_queues")) == (None, []), status
    assert served.exit_codes == {"notifier": 0, "writer": 0, "indexer": 0}


def test_rocketmq_reads_what_mqstore_wrote_to_the_255_byte_topic(long_store: LongTopicStore,
                                                                  served: Served) -> None:
    """mqstore's records for the 255-byte topic are V2 as RocketMQ 5 reads them: getMessage
    returns RocketMQ's messages then mqstore's, and queryMessage finds mqstore's keys."""
    reopened = served.reopened
    assert reopened.load["ok"] is True, reopened.log[-6000:]
    assert reopened.load["lastExitOK"] is True
    for key, views in by_queue(long_store.expected).items():
        queue = reopened.queues[key]
        assert queue["problems"] == [], (len(key[0]), key[1], queue["problems"])
        got = [jvm_view(m) for m in queue["messages"]]
        assert [_drop_magic(v) for v in got[:len(views)]] == [_drop_magic(v) for v in views]
        if key == (long_store.longest_topic, PRODUCED_QUEUE):
            added = queue["messages"][len(views):]
            assert [(m["queueOffset"], m["bodySha256"], m["keys"]) for m in added] == [
                (len(views) + number,
                 hashlib.sha256(f"from-mqstore-{number}".encode()).hexdigest(),
                 [f"mq-key-{number}"]) for number in range(PRODUCED)]
        else:
            assert len(got) == len(views)
    hits = {query["key"]: [hit["physicalOffset"] for hit in query["results"]
                           if hit.get("topic") == long_store.longest_topic]
            for query in reopened.queries}
    assert hits == {f"mq-key-{number}": [served.produced[number]["physical_offset"]]
                    for number in range(PRODUCED)}


def _drop_magic(view: View) -> View:
    """RocketMQ's getMessage decode does not report the magic (jvm_view assumes v1)."""
    return {name: value for name, value in view.items() if name != "magic"}

