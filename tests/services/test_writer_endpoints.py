"""The writer's endpoints, happy paths: what a put answers is what the store holds."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from mqstore.services.common.http.batch_wire import (
    BATCH_MEDIA_TYPE,
    RESULT_MEDIA_TYPE,
    BatchCodec,
    ResultCodec,
    WireMessage,
    msg_id,
)
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.storage import FlushMode, MessageStore
from tests.conftest import small_config
from tests.services.serving import run, writer_client


def test_one_json_message_is_stored_as_answered(store: MessageStore) -> None:
    async def scenario() -> None:
        async with writer_client(store) as client:
            response = await client.post("/v1/topics/Orders/messages", json={
                "body": "héllo", "queue_id": 3, "tags": "created", "keys": ["o-1", "o-2"],
                "properties": {"region": "eu"}})
            assert response.status == 200
            answer = await response.json()
        assert answer["status"] == "PUT_OK"
        assert answer["queue_id"] == 3
        assert answer["queue_offset"] == 0
        stored = store.message_at(answer["physical_offset"])
        assert stored.msg_id == answer["msg_id"]
        assert stored.store_timestamp_ms == answer["store_timestamp_ms"]
        assert (stored.topic, stored.queue_id, bytes(stored.body)) == ("Orders", 3,
                                                                      "héllo".encode())
        assert stored.tags == "created"
        assert stored.keys == ("o-1", "o-2")
        assert stored.properties["region"] == "eu"

    run(scenario)


def test_queue_ids_round_robin_per_topic_when_not_given(store: MessageStore) -> None:
    settings = WriterSettings(topic_queue_count=3)

    async def scenario() -> list[tuple[str, int]]:
        chosen = []
        async with writer_client(store, settings) as client:
            for topic in ("A", "B", "A", "A", "A", "B"):
                response = await client.post(f"/v1/topics/{topic}/messages",
                                             json={"body_base64": base64.b64encode(b"\0\1")
                                                   .decode()})
                chosen.append((topic, (await response.json())["queue_id"]))
        return chosen

    assert run(scenario) == [("A", 0), ("B", 0), ("A", 1), ("A", 2), ("A", 0), ("B", 1)]


def test_json_batch_of_one_topic(store: MessageStore) -> None:
    async def scenario() -> dict[str, list[dict[str, object]]]:
        async with writer_client(store) as client:
            response = await client.post("/v1/topics/T/messages/batch", json={"messages": [
                {"body": f"m{i}", "keys": [f"k{i}"]} for i in range(5)]})
            assert response.status == 200
            return await response.json()  # type: ignore[no-any-return]

    results = run(scenario)["results"]
    assert [r["queue_offset"] for r in results] == [0, 1, 2, 3, 4]
    assert len({r["queue_id"] for r in results}) == 1  # one queue per topic per request
    for index, result in enumerate(results):
        assert bytes(store.message_at(int(result["physical_offset"])).body) == f"m{index}".encode()


def _mixed_batch() -> list[WireMessage]:
    return [WireMessage("A", b"a0"), WireMessage("B", b"b0", queue_id=2, tags="t"),
            WireMessage("A", b"a1", keys=("x", "y")),
            WireMessage("B", b"b1", queue_id=2, properties={"p": "v"})]


def test_binary_batch_with_json_results(store: MessageStore) -> None:
    async def scenario() -> dict[str, list[dict[str, object]]]:
        async with writer_client(store) as client:
            response = await client.post("/v1/batch", data=BatchCodec.encode(_mixed_batch()),
                                         headers={"Content-Type": BATCH_MEDIA_TYPE})
            assert response.status == 200
            return await response.json()  # type: ignore[no-any-return]

    results = run(scenario)["results"]
    stored = [store.message_at(int(r["physical_offset"])) for r in results]
    assert [(m.topic, m.queue_id, bytes(m.body)) for m in stored] == [
        ("A", 0, b"a0"), ("B", 2, b"b0"), ("A", 0, b"a1"), ("B", 2, b"b1")]
    assert [r["queue_offset"] for r in results] == [0, 0, 1, 1]
    assert stored[1].tags == "t"
    assert stored[2].keys == ("x", "y")
    assert stored[3].properties["p"] == "v"


def test_binary_batch_with_binary_results(store: MessageStore) -> None:
    async def scenario() -> tuple[int, str, bytes]:
        async with writer_client(store) as client:
            response = await client.post("/v1/batch", data=BatchCodec.encode(_mixed_batch()),
                                         headers={"Content-Type": BATCH_MEDIA_TYPE,
                                                  "Accept": RESULT_MEDIA_TYPE})
            return response.status, response.content_type, await response.read()

    status, content_type, body = run(scenario)
    assert status == 200
    assert content_type == RESULT_MEDIA_TYPE
    host, rows = ResultCodec.decode(body)
    assert [(row.status, row.queue_id, row.queue_offset) for row in rows] == [
        ("PUT_OK", 0, 0), ("PUT_OK", 2, 0), ("PUT_OK", 0, 1), ("PUT_OK", 2, 1)]
    for row in rows:
        stored = store.message_at(row.physical_offset)
        assert stored.msg_id == msg_id(host, row.physical_offset)
        assert stored.store_timestamp_ms == row.store_timestamp_ms


def test_sync_flush_acknowledges_after_the_sync(store_dir: Path) -> None:
    config = small_config(flush_mode=FlushMode.SYNC)
    with MessageStore.open(store_dir, config) as store:
        async def scenario() -> list[int]:
            async with writer_client(store) as client:
                one = await client.post("/v1/topics/S/messages", json={"body": "x"})
                many = await client.post("/v1/batch", data=BatchCodec.encode(
                    [WireMessage("S", b"y")] * 10), headers={"Content-Type": BATCH_MEDIA_TYPE})
                assert store.flushed_position == store.written_position
                return [one.status, many.status]

        assert run(scenario) == [200, 200]


def test_probes_metrics_and_document(store: MessageStore) -> None:
    async def scenario() -> None:
        async with writer_client(store) as client:
            await client.post("/v1/topics/M/messages", json={"body": "x"})
            await client.post("/v1/topics/M/messages", json={"body": ""})
            assert (await client.get("/healthz")).status == 200
            assert await (await client.get("/readyz")).json() == {"status": "ready",
                                                                 "pid": os.getpid()}
            text = await (await client.get("/metrics")).text()
            document = await (await client.get("/openapi.json")).json()
        assert 'mqstore_put_requests_total{code="200",endpoint="put_message"} 1.0' in text
        assert 'mqstore_put_requests_total{code="400",endpoint="put_message"} 1.0' in text
        assert 'mqstore_put_messages_total{status="PUT_OK"} 1.0' in text
        assert f'mqstore_commitlog_position_bytes{{watermark="written"}} ' \
               f'{float(store.written_position)}' in text
        assert "mqstore_put_latency_seconds_bucket" in text
        assert "mqstore_flush_lag_bytes" in text
        assert "mqstore_pool_buffers_free" not in text  # no pool: the series is absent
        assert document["openapi"].startswith("3.1")

    run(scenario)


def test_readyz_fails_once_the_store_is_closed(store_dir: Path) -> None:
    store = MessageStore.open(store_dir, small_config())

    async def scenario() -> tuple[int, dict[str, dict[str, str]]]:
        async with writer_client(store) as client:
            store.close()
            response = await client.get("/readyz")
            return response.status, await response.json()

    status, body = run(scenario)
    assert status == 503
    assert body["error"] == {"status": "NOT_READY", "reason": "store is closed"}
