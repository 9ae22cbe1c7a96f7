"""What the interop tests write and how they compare it: the corpus mqstore writes, and one
view of a message for both sides (RocketMQ's JSON and mqstore's `StoredMessage`).

Shared by the record-level tests (`test_rocketmq_interop.py`), the whole-store tests
(`test_mqstore_store_in_rocketmq.py`, `test_rocketmq_store_in_mqstore.py`) and the killed
writer (`writer_child.py`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import random
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqstore import storage as mq
from tests.interop.rocketmq_jvm import Layout

MESSAGE_MAGIC = 0xDAA320A7
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
LARGE_BODY = 64 * 1024
# Properties RocketMQ's broker/client add on their own; mqstore may add these, nothing else.
SYSTEM_PROPERTY_NAMES = frozenset({"UNIQ_KEY", "CLUSTER", "WAIT", "MSG_REGION", "TRACE_ON"})
UNIQ_KEY = "UNIQ_KEY"

View = dict[str, Any]


# --------------------------------------------------------------------------- field views


def normalize_host(text: str) -> str:
    """'1.2.3.4:80' or '[v6]:80' in canonical form (Java prints IPv6 uncompressed)."""
    host, _, port = text.rpartition(":")
    ip = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    return f"[{ip.compressed}]:{int(port)}" if ip.version == 6 else f"{ip}:{int(port)}"


def body_digest(body: bytes) -> tuple[int, str]:
    """Bodies are compared by (length, sha256) so a mismatch diff stays readable."""
    return len(body), hashlib.sha256(body).hexdigest()


def jvm_view(record: dict[str, Any]) -> View:
    """A RocketMQ-side JSON record (write, read or open) under StoredMessage attribute names."""
    body = (body_digest(record["body"]) if "body" in record
            else (record["bodyLength"], record["bodySha256"]))
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
        "body": body,
        "topic": record["topic"],
        "properties": dict(record["properties"]),
        "tags": record["tags"],
        "keys": tuple(record["keys"]),
        "msg_id": record["msgId"],
    }


def mqstore_view(m: Any) -> View:
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


def view_from_json(obj: dict[str, Any]) -> View:
    """A view sent as JSON (by writer_child.py): lists back to the tuples views hold."""
    return {**obj, "body": tuple(obj["body"]), "keys": tuple(obj["keys"])}


def assert_corpus_is_varied(views: list[View], *, ipv6_store_host: bool = True) -> None:
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
    if ipv6_store_host:
        assert any(v["sysflag"] & STOREHOST_V6_FLAG for v in views), "no IPv6 store host"
        assert not all(v["sysflag"] & STOREHOST_V6_FLAG for v in views), "no IPv4 store host"


def unique_key(view: View) -> str | None:
    value: str | None = view["properties"].get(UNIQ_KEY)
    return value


# --------------------------------------------------------------------------- what to look up


Query = tuple[str, str, str]
"""("key", topic, key) or ("tag", topic, tags): one lookup in a store's index."""


def index_queries(views: Iterable[View], *, tags: bool) -> dict[Query, list[int]]:
    """Every key (KEYS entries and UNIQ_KEY) of every message, and with `tags` every TAGS value
    (RocketMQ 5 indexes the whole property), each with the physical offsets of the messages it
    must find, oldest first."""
    found: dict[Query, list[int]] = {}
    for view in sorted(views, key=lambda v: v["physical_offset"]):
        topic = view["topic"]
        names = dict.fromkeys([*view["keys"], unique_key(view) or ""])
        queries: list[Query] = [("key", topic, name) for name in names if name]
        if tags and view["tags"]:
            queries.append(("tag", topic, view["tags"]))
        for query in queries:
            found.setdefault(query, []).append(view["physical_offset"])
    return found


def hit_matches(query: Query, hit: dict[str, Any]) -> bool:
    """What a RocketMQ client keeps of a queryMessage answer (the index stores only a hash, so
    other keys' messages come back on a collision, and the client drops them)."""
    kind, topic, name = query
    if hit.get("topic") != topic:
        return False
    if kind == "tag":
        return bool(hit["tags"] == name)
    return name in hit["keys"] or hit["uniqKey"] == name


def duplicates(offsets: Iterable[int]) -> dict[int, int]:
    """Offsets found more than once, with how often."""
    return {offset: n for offset, n in Counter(offsets).items() if n > 1}


def by_queue(views: Iterable[View]) -> dict[tuple[str, int], list[View]]:
    """Each queue's messages in queue-offset order."""
    queues: dict[tuple[str, int], list[View]] = {}
    for view in sorted(views, key=lambda v: v["queue_offset"]):
        queues.setdefault((view["topic"], view["queue_id"]), []).append(view)
    return queues


def read_every_queue(store: Any, keys: Iterable[tuple[str, int]]
                     ) -> dict[tuple[str, int], tuple[list[View], str]]:
    """Every message of each queue, read through `store.get` from its min offset, as views,
    with the status that ended the reading (OFFSET_OVERFLOW_ONE at the queue's end)."""
    found: dict[tuple[str, int], tuple[list[View], str]] = {}
    for topic, queue_id in sorted(keys):
        offset, messages = store.min_offset(topic, queue_id), []
        while True:
            with store.get(topic, queue_id, offset, 32) as result:
                if result.status.name != "FOUND":
                    break
                messages.extend(mqstore_view(m) for m in result.messages)
                offset = result.next_offset
        found[topic, queue_id] = (messages, result.status.name)
    return found


# --------------------------------------------------------------------------- mqstore's corpus


@dataclass(frozen=True)
class Outgoing:
    topic: str
    queue_id: int
    body: bytes
    tags: str | None = None
    keys: tuple[str, ...] = ()
    properties: dict[str, str] = field(default_factory=dict)
    born_host: str | None = None
    flag: int = 0
    unique_key: str | None = None
    """Put in UNIQ_KEY, as RocketMQ's client does; the index then holds it too."""

    def expected_properties(self) -> dict[str, str]:
        """The properties a reader must see, beside the system ones (SYSTEM_PROPERTY_NAMES)."""
        props = dict(self.properties)
        if self.tags is not None:
            props["TAGS"] = self.tags
        if self.keys:
            props["KEYS"] = " ".join(self.keys)
        return props

    def message(self) -> mq.Message:
        properties = dict(self.properties)
        if self.unique_key is not None:
            properties[UNIQ_KEY] = self.unique_key
        return mq.Message(self.topic, self.queue_id, self.body, tags=self.tags, keys=self.keys,
                          properties=properties or None, born_host=self.born_host,
                          flag=self.flag)


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
        uniq = f"7F0000010000{i:020X}" if i % 7 != 3 else None
        if i % 9 == 4:  # no properties at all: zero-length properties field
            tags, keys, properties, uniq = None, (), {}, None
        messages.append(
            Outgoing(
                topic=topic,
                queue_id=(i // 8) % 4,
                body=rng.randbytes(size),
                tags=tags,
                keys=keys,
                properties=properties,
                born_host=BORN_HOSTS[i % len(BORN_HOSTS)],
                flag=0 if i % 6 else i * 37,
                unique_key=uniq,
            )
        )
    return messages


def expected_record(sent: Outgoing, put: Any, stored: Any) -> View:
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
        "flag": sent.flag,
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


def store_config(layout: Layout, **overrides: Any) -> mq.StoreConfig:
    """mqstore's settings for `layout`.  The plain StoreConfig(segment_size_bytes=...) keeps
    RocketMQ's 4 MiB body maximum, which cannot fit a small segment, so use the constructor
    that scales the maxima."""
    settings: dict[str, Any] = {
        "consume_queue_file_size_bytes": layout.consume_queue_file_bytes,
        "index_hash_slot_count": layout.index_hash_slots,
        "index_count_max": layout.index_count_max,
        "index_query_results_max": max(64, layout.query_max),
    }
    settings.update(overrides)
    return mq.StoreConfig.for_small_segments(layout.segment_bytes, **settings)


def put_one(store: Any, sent: Outgoing, next_queue_offset: Counter[tuple[str, int]]) -> View:
    put = store.put(sent.message())
    return _checked(store, sent, put, next_queue_offset)


def put_batch(store: Any, batch: Sequence[Outgoing],
              next_queue_offset: Counter[tuple[str, int]]) -> list[View]:
    results = store.put_batch([sent.message() for sent in batch])
    return [_checked(store, sent, put, next_queue_offset)
            for sent, put in zip(batch, results, strict=True)]


def _checked(store: Any, sent: Outgoing, put: Any,
             next_queue_offset: Counter[tuple[str, int]]) -> View:
    assert put.status is mq.PutStatus.PUT_OK, put
    assert put.queue_offset == next_queue_offset[sent.topic, sent.queue_id]
    next_queue_offset[sent.topic, sent.queue_id] += 1
    return expected_record(sent, put, store.message_at(put.physical_offset))


def put_corpus(directory: Path, corpus: Sequence[Outgoing], config: mq.StoreConfig,
               *, batch: int = 1, queue_offsets: Counter[tuple[str, int]] | None = None,
               on_put: Callable[[View], None] | None = None) -> list[View]:
    """Open, put `corpus` (in `put_batch` calls of `batch` messages when batch > 1), close."""
    next_queue_offset = queue_offsets if queue_offsets is not None else Counter()
    expected: list[View] = []
    store = mq.MessageStore.open(directory, config)
    try:
        for start in range(0, len(corpus), batch):
            chunk = corpus[start:start + batch]
            views = (put_batch(store, chunk, next_queue_offset) if batch > 1
                     else [put_one(store, chunk[0], next_queue_offset)])
            for view in views:
                expected.append(view)
                if on_put is not None:
                    on_put(view)
    finally:
        store.close()
    return expected
