"""Byte compatibility of mqstore's commit log with Apache RocketMQ 4.9.4, checked by RocketMQ.

* RocketMQ -> mqstore: RocketMQ's ``DefaultMessageStore`` (run on the JVM) writes ~300 varied
  messages into 1 MiB segments; mqstore opens that directory and must report every field of
  every message exactly as RocketMQ did, both by offset and by iteration.
* mqstore -> RocketMQ: mqstore writes a similar corpus; RocketMQ's ``MessageDecoder`` must decode
  every record to the inputs / PutResults, and RocketMQ's own recovery (full CRC check of every
  record) and ``CommitLog.checkMessageAndReturnSize`` must accept the directory.

The JVM side is ``tests/interop/java`` driven by ``rocketmq_jvm.py``. These tests need ``java``,
``javac`` and ``mvn`` (plus Maven Central on the first run) and fail when they are missing.
Run with ``pytest -m interop tests/interop``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import random
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mqstore import storage as mq

pytestmark = pytest.mark.interop

SEGMENT_BYTES = 1 << 20
MESSAGE_COUNT = 300
MESSAGE_MAGIC = 0xDAA320A7
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
LARGE_BODY = 64 * 1024
# Properties RocketMQ's broker/client add on their own; mqstore may add these, nothing else.
SYSTEM_PROPERTY_NAMES = frozenset({"UNIQ_KEY", "CLUSTER", "WAIT", "MSG_REGION", "TRACE_ON"})


# --------------------------------------------------------------------------- field views


def normalize_host(text: str) -> str:
    """'1.2.3.4:80' or '[v6]:80' in canonical form (Java prints IPv6 uncompressed)."""
    host, _, port = text.rpartition(":")
    ip = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    return f"[{ip.compressed}]:{int(port)}" if ip.version == 6 else f"{ip}:{int(port)}"


def body_digest(body: bytes) -> tuple[int, str]:
    """Bodies are compared by (length, sha256) so a mismatch diff stays readable."""
    return len(body), hashlib.sha256(body).hexdigest()


def jvm_view(record: dict[str, Any]) -> dict[str, Any]:
    """A RocketMQ-side JSON record (write or read) under StoredMessage attribute names."""
    return {
        "total_size": record["storeSize"],
        "magic": record.get("magic", MESSAGE_MAGIC) & 0xFFFFFFFF,
        "body_crc": record["bodyCrc"],
        "queue_id": record["queueId"],
        "flag": record["flag"],
        "queue_offset": record["queueOffset"],
        "physical_offset": record["physicalOffset"],
        "sysflag": record["sysFlag"],
        "born_timestamp_ms": record["bornTimestamp"],
        "born_host": normalize_host(record["bornHost"]),
        "store_timestamp_ms": record["storeTimestamp"],
        "store_host": normalize_host(record["storeHost"]),
        "reconsume_times": record["reconsumeTimes"],
        "prepared_transaction_offset": record["preparedTransactionOffset"],
        "body": body_digest(record["body"]),
        "topic": record["topic"],
        "properties": dict(record["properties"]),
        "tags": record["tags"],
        "keys": tuple(record["keys"]),
        "msg_id": record["msgId"],
    }


def mqstore_view(m: Any) -> dict[str, Any]:
    """An mqstore StoredMessage in the same shape as jvm_view."""
    return {
        "total_size": m.total_size,
        "magic": m.magic & 0xFFFFFFFF,
        "body_crc": m.body_crc,
        "queue_id": m.queue_id,
        "flag": m.flag,
        "queue_offset": m.queue_offset,
        "physical_offset": m.physical_offset,
        "sysflag": m.sysflag,
        "born_timestamp_ms": m.born_timestamp_ms,
        "born_host": normalize_host(m.born_host),
        "store_timestamp_ms": m.store_timestamp_ms,
        "store_host": normalize_host(m.store_host),
        "reconsume_times": m.reconsume_times,
        "prepared_transaction_offset": m.prepared_transaction_offset,
        "body": body_digest(bytes(m.body)),
        "topic": m.topic,
        "properties": dict(m.properties),
        "tags": m.tags,
        "keys": tuple(m.keys),
        "msg_id": m.msg_id,
    }


def assert_corpus_is_varied(views: list[dict[str, Any]]) -> None:
    """Guard against a corpus silently losing the cases these tests exist for."""
    assert any(v["sysflag"] & BORNHOST_V6_FLAG for v in views), "no IPv6 born host"
    assert any(v["body"][0] == 0 for v in views), "no empty body"
    assert any(v["body"][0] >= LARGE_BODY for v in views), "no ~64 KiB body"
    assert any(v["tags"] for v in views) and any(v["tags"] is None for v in views)
    assert any(len(v["keys"]) >= 3 for v in views), "no multi-key message"
    user_props = [set(v["properties"]) - SYSTEM_PROPERTY_NAMES for v in views]
    assert any(not names for names in user_props), "no message without properties"
    assert any(names - {"TAGS", "KEYS"} for names in user_props), "no user-defined property"
    assert {len(v["topic"].encode()) for v in views} >= {1, 127}
    assert {v["queue_id"] for v in views} == {0, 1, 2, 3}


CONSUME_QUEUE_FILE_BYTES = 1000 * 20
"""What the Java side sets as mappedFileSizeConsumeQueue: mqstore opens RocketMQ's own
consume queue files, so the sizes must agree."""


def store_config() -> Any:
    """1 MiB segments. The plain StoreConfig(segment_size_bytes=...) keeps RocketMQ's 4 MiB body
    maximum, which cannot fit a 1 MiB segment, so use the constructor that scales the maxima."""
    return mq.StoreConfig.for_small_segments(
        SEGMENT_BYTES, consume_queue_file_size_bytes=CONSUME_QUEUE_FILE_BYTES)


def read_every_queue(store: Any, keys: set[tuple[str, int]]) -> dict[tuple[str, int], list[int]]:
    """Physical offsets of every message of each queue, read through `store.get`."""
    found: dict[tuple[str, int], list[int]] = {}
    for topic, queue_id in sorted(keys):
        offset, positions = 0, []
        while True:
            with store.get(topic, queue_id, offset, 32) as result:
                if result.status.name != "FOUND":
                    assert result.status.name == "OFFSET_OVERFLOW_ONE", result
                    break
                positions.extend(m.physical_offset for m in result.messages)
                offset = result.next_offset
        found[topic, queue_id] = positions
    return found


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in (directory / "commitlog").iterdir())


# --------------------------------------------------------------------------- harness self-check


def test_rocketmq_read_agrees_with_rocketmq_write(tmp_path: Path, rocketmq_jvm: Any) -> None:
    """The JVM harness itself: what RocketMQ's store reports on put, its decoder reads back."""
    directory = tmp_path / "rocketmq"
    written = rocketmq_jvm.write(directory, MESSAGE_COUNT, SEGMENT_BYTES)
    result = rocketmq_jvm.read_full(directory)

    assert result.summary["storeLoad"] is True, result.summary
    assert result.summary["storeCheckFailures"] == 0
    assert result.summary["recoveredMaxPhyOffset"] == result.summary["endOffset"]
    assert len(result.summary["files"]) >= 2
    assert [jvm_view(r) for r in result.records] == [jvm_view(w) for w in written]
    for record, wrote in zip(result.records, written, strict=True):
        assert record["tagsCode"] == wrote["tagsCode"]
        assert record["consumeQueuePhysicalOffset"] == record["physicalOffset"]
    assert_corpus_is_varied([jvm_view(w) for w in written])


# --------------------------------------------------------------------------- RocketMQ -> mqstore


def test_mqstore_reads_commitlog_written_by_rocketmq(tmp_path: Path, rocketmq_jvm: Any) -> None:
    directory = tmp_path / "written-by-rocketmq"
    written = rocketmq_jvm.write(directory, MESSAGE_COUNT, SEGMENT_BYTES)
    expected = [jvm_view(w) for w in written]
    assert_corpus_is_varied(expected)
    assert len(segment_files(directory)) >= 2, "RocketMQ did not roll a segment"
    offsets = [e["physical_offset"] for e in expected]
    assert offsets == sorted(offsets)

    store = mq.MessageStore.open(directory, store_config())
    try:
        by_offset = [mqstore_view(store.message_at(offset)) for offset in offsets]
        iterated = [mqstore_view(m) for m in store.iter_messages()]
        through_queues = read_every_queue(store, {(e["topic"], e["queue_id"]) for e in expected})
    finally:
        store.close()

    # RocketMQ's own consume queues, read by mqstore: each queue lists its messages in order.
    for key, physical_offsets in through_queues.items():
        want = [e["physical_offset"] for e in expected if (e["topic"], e["queue_id"]) == key]
        assert physical_offsets == want, f"consume queue {key}"

    for index, (got, want) in enumerate(zip(by_offset, expected, strict=True)):
        assert got == want, f"message_at({want['physical_offset']}) for message #{index}"
    assert [m["physical_offset"] for m in iterated] == offsets, "iter_messages() order/coverage"
    for index, (got, want) in enumerate(zip(iterated, expected, strict=True)):
        assert got == want, f"iter_messages() item #{index}"


# --------------------------------------------------------------------------- mqstore -> RocketMQ


@dataclass(frozen=True)
class Outgoing:
    topic: str
    queue_id: int
    body: bytes
    tags: str | None = None
    keys: tuple[str, ...] = ()
    properties: dict[str, str] = field(default_factory=dict)
    born_host: str | None = None

    def expected_properties(self) -> dict[str, str]:
        props = dict(self.properties)
        if self.tags is not None:
            props["TAGS"] = self.tags
        if self.keys:
            props["KEYS"] = " ".join(self.keys)
        return props


TOPIC_LENGTHS = (1, 2, 9, 31, 64, 100, 126, 127)
TOPIC_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-%|"
BODY_SIZES = (0, 1, 17, 128, 1000, 4096, LARGE_BODY, 0, 333, 9000)
BORN_HOSTS = (None, "10.1.2.3:5555", "[2001:db8::42]:5555", "192.168.0.77:61000", "[::1]:6000")


def outgoing_corpus(count: int) -> list[Outgoing]:
    rng = random.Random(0x5EED)
    messages = []
    for i in range(count):
        length = TOPIC_LENGTHS[i % len(TOPIC_LENGTHS)]
        topic = "M" + "".join(
            TOPIC_ALPHABET[(k * 5 + length) % len(TOPIC_ALPHABET)] for k in range(1, length)
        )
        size = BODY_SIZES[i % len(BODY_SIZES)]
        if size == LARGE_BODY and i % 20 != 6:
            size = rng.randrange(20_000)
        tags = (None, "TagA", f"tag-{i % 5}", "\u6807\u7b7e")[i % 4]
        keys = ((), (f"k-{i}",), (f"order-{i}", f"user-{i % 13}", f"trace-{i * 7919:x}"))[i % 3]
        properties: dict[str, str] = {}
        if i % 5 == 0:
            greeting = "h\u00e9llo \u2713 \u6d88\u606f"
            properties = {"color": "blue", "seq": str(i), "greeting": greeting}
        if i % 9 == 4:  # no properties at all: zero-length properties field
            tags, keys, properties = None, (), {}
        messages.append(
            Outgoing(
                topic=topic,
                queue_id=(i // 8) % 4,
                body=rng.randbytes(size),
                tags=tags,
                keys=keys,
                properties=properties,
                born_host=BORN_HOSTS[i % len(BORN_HOSTS)],
            )
        )
    return messages


def expected_record(sent: Outgoing, put: Any, stored: Any) -> dict[str, Any]:
    """What RocketMQ must decode for one message: inputs and PutResult first; only fields the
    mqstore API does not let a caller choose (born timestamp, default born host, store host,
    record size) come from mqstore's own view of the record."""
    born_host = normalize_host(sent.born_host or stored.born_host)
    store_host = normalize_host(stored.store_host)
    sysflag = (BORNHOST_V6_FLAG if born_host.startswith("[") else 0) | (
        STOREHOST_V6_FLAG if store_host.startswith("[") else 0
    )
    return {
        "total_size": stored.total_size,
        "magic": MESSAGE_MAGIC,
        "body_crc": zlib.crc32(sent.body) & 0x7FFFFFFF,
        "queue_id": sent.queue_id,
        "flag": 0,
        "queue_offset": put.queue_offset,
        "physical_offset": put.physical_offset,
        "sysflag": sysflag,
        "born_timestamp_ms": stored.born_timestamp_ms,
        "born_host": born_host,
        "store_timestamp_ms": put.store_timestamp_ms,
        "store_host": store_host,
        "reconsume_times": 0,
        "prepared_transaction_offset": 0,
        "body": body_digest(sent.body),
        "topic": sent.topic,
        "properties": dict(stored.properties),  # checked against the inputs separately
        "tags": sent.tags,
        "keys": sent.keys,
        "msg_id": put.msg_id,
    }


def put_corpus(directory: Path, corpus: list[Outgoing]) -> list[dict[str, Any]]:
    store = mq.MessageStore.open(directory, store_config())
    expected = []
    next_queue_offset: Counter[tuple[str, int]] = Counter()
    try:
        for sent in corpus:
            put = store.put(
                mq.Message(
                    sent.topic,
                    sent.queue_id,
                    sent.body,
                    tags=sent.tags,
                    keys=sent.keys,
                    properties=sent.properties or None,
                    born_host=sent.born_host,
                )
            )
            assert put.status is mq.PutStatus.PUT_OK, put
            assert put.queue_offset == next_queue_offset[sent.topic, sent.queue_id]
            next_queue_offset[sent.topic, sent.queue_id] += 1
            expected.append(expected_record(sent, put, store.message_at(put.physical_offset)))
    finally:
        store.close()
    return expected


def test_rocketmq_decodes_commitlog_written_by_mqstore(tmp_path: Path, rocketmq_jvm: Any) -> None:
    directory = tmp_path / "written-by-mqstore"
    corpus = outgoing_corpus(MESSAGE_COUNT)
    expected = put_corpus(directory, corpus)
    assert len(segment_files(directory)) >= 2, "mqstore did not roll a segment"

    result = rocketmq_jvm.read_full(directory)
    summary = result.summary
    assert summary["records"] == len(corpus), summary
    assert summary["storeLoad"] is True, summary.get("storeLoadError")
    assert summary["recoveredMaxPhyOffset"] == summary["endOffset"], "recovery stopped early"
    assert summary["storeCheckFailures"] == 0, summary

    got = [jvm_view(r) for r in result.records]
    assert [g["physical_offset"] for g in got] == [e["physical_offset"] for e in expected]
    rows = zip(result.records, got, expected, corpus, strict=True)
    for index, (record, view, want, sent) in enumerate(rows):
        where = f"message #{index} at offset {want['physical_offset']}"
        assert view == want, where
        assert record["filePosition"] == record["physicalOffset"], where
        assert record["storeCheck"] is True, where
        assert record["consumeQueuePhysicalOffset"] == record["physicalOffset"], where
        props = view["properties"]
        user_visible = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_NAMES}
        assert user_visible == sent.expected_properties(), where
    assert_corpus_is_varied(got)
