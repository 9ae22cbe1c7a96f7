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

from pathlib import Path
from typing import Any

import pytest

from mqstore import storage as mq
from tests.interop.corpus import (
    SYSTEM_PROPERTY_NAMES,
    assert_corpus_is_varied,
    jvm_view,
    mqstore_view,
    outgoing_corpus,
    put_corpus,
    read_every_queue,
    store_config,
)
from tests.interop.rocketmq_jvm import Layout

pytestmark = pytest.mark.interop

LAYOUT = Layout(segment_bytes=1 << 20, consume_queue_file_bytes=1000 * 20)
"""1 MiB segments; the consume queue file size is what mqstore must agree on to open
RocketMQ's own consume queue files."""
MESSAGE_COUNT = 300


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in (directory / "commitlog").iterdir())


# --------------------------------------------------------------------------- harness self-check


def test_rocketmq_read_agrees_with_rocketmq_write(tmp_path: Path, rocketmq_jvm: Any) -> None:
    """The JVM harness itself: what RocketMQ's store reports on put, its decoder reads back."""
    directory = tmp_path / "rocketmq"
    written = rocketmq_jvm.write(directory, MESSAGE_COUNT, LAYOUT)
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
    written = rocketmq_jvm.write(directory, MESSAGE_COUNT, LAYOUT)
    expected = [jvm_view(w) for w in written]
    assert_corpus_is_varied(expected)
    assert len(segment_files(directory)) >= 2, "RocketMQ did not roll a segment"
    offsets = [e["physical_offset"] for e in expected]
    assert offsets == sorted(offsets)

    store = mq.MessageStore.open(directory, store_config(LAYOUT))
    try:
        by_offset = [mqstore_view(store.message_at(offset)) for offset in offsets]
        iterated = [mqstore_view(m) for m in store.iter_messages()]
        through_queues = read_every_queue(store, {(e["topic"], e["queue_id"]) for e in expected})
    finally:
        store.close()

    # RocketMQ's own consume queues, read by mqstore: each queue lists its messages in order.
    for key, (messages, status) in through_queues.items():
        want = [e["physical_offset"] for e in expected if (e["topic"], e["queue_id"]) == key]
        assert [m["physical_offset"] for m in messages] == want, f"consume queue {key}"
        assert status == "OFFSET_OVERFLOW_ONE", f"consume queue {key}"

    for index, (got, want) in enumerate(zip(by_offset, expected, strict=True)):
        assert got == want, f"message_at({want['physical_offset']}) for message #{index}"
    assert [m["physical_offset"] for m in iterated] == offsets, "iter_messages() order/coverage"
    for index, (got, want) in enumerate(zip(iterated, expected, strict=True)):
        assert got == want, f"iter_messages() item #{index}"


# --------------------------------------------------------------------------- mqstore -> RocketMQ


def test_rocketmq_decodes_commitlog_written_by_mqstore(tmp_path: Path, rocketmq_jvm: Any) -> None:
    directory = tmp_path / "written-by-mqstore"
    corpus = outgoing_corpus(MESSAGE_COUNT)
    expected = put_corpus(directory, corpus, store_config(LAYOUT))
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
    assert_corpus_is_varied(got, ipv6_store_host=False)  # one store, one (IPv4) store host
