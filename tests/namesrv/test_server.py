"""NamesrvServer (services/namesrv/server.py) over loopback: the codes a broker and a client
send, unknown codes, the bounds, and a closed connection dropping its broker."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable

import pytest

from mqstore.services.namesrv import handlers
from mqstore.services.namesrv.run import build
from mqstore.services.namesrv.server import NamesrvServer
from mqstore.services.namesrv.settings import NamesrvConfigError, NamesrvSettings
from mqstore.services.notifier.remoting import codes
from tests.remoting.client import RemotingClient

SETTINGS = NamesrvSettings(port=0, brokers_max=2, topics_per_broker_max=3,
                           kv_entries_max=2, frame_size_bytes_max=64 * 1024)


def register_header(name: str, address: str, broker_id: int = 0) -> dict[str, str]:
    return {"brokerName": name, "brokerAddr": address, "clusterName": "DefaultCluster",
            "haServerAddr": address, "brokerId": str(broker_id), "compressed": "false",
            "bodyCrc32": "0"}


def register_body(*topics: str, counter: int = 1) -> bytes:
    return json.dumps({"topicConfigSerializeWrapper": {
        "topicConfigTable": {topic: {"topicName": topic, "readQueueNums": 4,
                                     "writeQueueNums": 4, "perm": 6} for topic in topics},
        "dataVersion": {"counter": counter, "timestamp": 1}}, "filterServerList": []}).encode()


def serve(test: Callable[[NamesrvServer, str], Awaitable[None]],
          settings: NamesrvSettings = SETTINGS) -> None:
    async def run() -> None:
        server = build(settings)
        port = await server.start()
        try:
            await test(server, f"127.0.0.1:{port}")
        finally:
            await server.close()
    asyncio.run(run())


def test_a_broker_registers_and_a_client_gets_its_route() -> None:
    async def test(server: NamesrvServer, address: str) -> None:
        broker = await RemotingClient.connect(address)
        client = await RemotingClient.connect(address)
        answer = await broker.request(handlers.REGISTER_BROKER, register_header("a", "h:1"),
                                      register_body("t"))
        assert (answer.code, answer.body) == (codes.SUCCESS, b"")
        route = await client.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "t"})
        assert route.code == codes.SUCCESS
        assert json.loads(route.body)["brokerDatas"][0]["brokerAddrs"] == {"0": "h:1"}
        missing = await client.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "nope"})
        assert missing.code == codes.TOPIC_NOT_EXIST
        assert "No topic route info" in (missing.remark or "")
        info = await client.request(codes.GET_BROKER_CLUSTER_INFO)
        assert json.loads(info.body)["clusterAddrTable"] == {"DefaultCluster": ["a"]}
        listed = await client.request(codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert json.loads(listed.body) == {"topicList": ["t"]}
        by_cluster = await client.request(codes.GET_TOPICS_BY_CLUSTER,
                                          {"cluster": "DefaultCluster"})
        assert json.loads(by_cluster.body) == {"topicList": ["t"]}
        version = await broker.request(handlers.QUERY_DATA_VERSION, register_header("a", "h:1"),
                                       b'{"counter":1,"timestamp":1}')
        assert version.ext_fields["changed"] == "false"
        beat = await broker.request(handlers.BROKER_HEARTBEAT, register_header("a", "h:1"))
        assert beat.code == codes.SUCCESS
        await broker.close()  # its connection closes: the broker leaves the routes
        for _ in range(100):
            if not server.namesrv.routes.live:
                break
            await asyncio.sleep(0.01)
        gone = await client.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "t"})
        assert gone.code == codes.TOPIC_NOT_EXIST
        await client.close()
    serve(test)


def test_unregister_and_the_kv_codes() -> None:
    async def test(server: NamesrvServer, address: str) -> None:
        client = await RemotingClient.connect(address)
        await client.request(handlers.REGISTER_BROKER, register_header("a", "h:1"),
                             register_body("t"))
        order = {"namespace": "ORDER_TOPIC_CONFIG", "key": "t", "value": "a:4"}
        assert (await client.request(handlers.PUT_KV_CONFIG, order)).code == codes.SUCCESS
        got = await client.request(handlers.GET_KV_CONFIG, order)
        assert got.ext_fields["value"] == "a:4"
        listed = await client.request(handlers.GET_KVLIST_BY_NAMESPACE, order)
        assert json.loads(listed.body) == {"table": {"t": "a:4"}}
        again = await client.request(handlers.REGISTER_BROKER, register_header("a", "h:1"),
                                     register_body("t"))
        assert json.loads(again.body) == {"table": {"t": "a:4"}}
        await client.request(handlers.DELETE_KV_CONFIG, order)
        missing = await client.request(handlers.GET_KV_CONFIG, order)
        assert missing.code == codes.QUERY_NOT_FOUND
        assert (await client.request(handlers.GET_KVLIST_BY_NAMESPACE, order)).code == 22
        await client.request(handlers.UNREGISTER_BROKER, register_header("a", "h:1"))
        assert server.namesrv.routes.topic_names() == []
        await client.close()
    serve(test)


def test_past_a_bound_an_error_with_a_remark() -> None:
    async def test(server: NamesrvServer, address: str) -> None:
        client = await RemotingClient.connect(address)
        for name in ("a", "b"):
            await client.request(handlers.REGISTER_BROKER, register_header(name, f"h:{name}"),
                                 register_body("t"))
        third = await client.request(handlers.REGISTER_BROKER, register_header("c", "h:c"),
                                     register_body("t"))
        assert third.code == codes.SYSTEM_ERROR
        assert "brokers_max=2" in (third.remark or "")
        many = await client.request(handlers.REGISTER_BROKER, register_header("a", "h:a"),
                                    register_body("t", "u", "v", "w", counter=2))
        assert "topics_per_broker_max=3" in (many.remark or "")
        kv = {"namespace": "n", "value": "v"}
        for key in ("1", "2", "3"):
            answer = await client.request(handlers.PUT_KV_CONFIG, kv | {"key": key})
        assert "kv_entries_max=2" in (answer.remark or "")
        unknown = await client.request(999_999 % 32_768)
        assert unknown.code == codes.REQUEST_CODE_NOT_SUPPORTED
        assert "request type" in (unknown.remark or "")
        bad_crc = await client.request(handlers.REGISTER_BROKER, register_header("a", "h:a")
                                       | {"bodyCrc32": "1"}, register_body("t"))
        assert (bad_crc.code, bad_crc.remark) == (codes.SYSTEM_ERROR, "crc32 not match")
        no_header = await client.request(handlers.REGISTER_BROKER, {})
        assert no_header.code == codes.SYSTEM_ERROR
        await client.close()
    serve(test)


def test_a_frame_over_the_bound_closes_and_silent_brokers_expire() -> None:
    async def test(server: NamesrvServer, address: str) -> None:
        client = await RemotingClient.connect(address)
        await client.request(handlers.REGISTER_BROKER, register_header("a", "h:1"),
                             register_body("t"))
        server.namesrv.now_ms = lambda: 10**12  # far past every broker's last registration
        assert server.expire() == ["h:1"]
        client.raw((128 * 1024).to_bytes(4, "big") + b"x" * 16)
        with pytest.raises((asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError)):
            await client.request(codes.GET_BROKER_CLUSTER_INFO, timeout_s=2)
        await client.close()
    serve(test)


@pytest.mark.parametrize("bad", [{"port": 70_000}, {"brokers_max": 0},
                                 {"expiry_scan_interval_ms": 200_000},
                                 {"frame_size_bytes_max": 1024}])
def test_settings_out_of_range_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(NamesrvConfigError):
        dataclasses.replace(NamesrvSettings(), **bad)


def test_the_expiry_scan_drops_a_silent_broker_on_its_own() -> None:
    """The connection stays open: only the scan (every 50 ms, expiry 300 ms) drops it."""
    settings = dataclasses.replace(SETTINGS, broker_expiry_ms=300, expiry_scan_interval_ms=50)

    async def test(server: NamesrvServer, address: str) -> None:
        client = await RemotingClient.connect(address)
        await client.request(handlers.REGISTER_BROKER, register_header("a", "h:1"),
                             register_body("t"))
        unknown = await client.request(handlers.QUERY_DATA_VERSION,
                                       register_header("b", "h:2"), b"{}")
        assert (unknown.ext_fields["changed"], unknown.body) == ("true", b"")
        registered_s = time.monotonic()
        while server.namesrv.routes.live:
            assert time.monotonic() - registered_s < 5, "never expired"
            await asyncio.sleep(0.02)
        assert time.monotonic() - registered_s >= 0.25  # not long before broker_expiry_ms
        gone = await client.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "t"})
        assert gone.code == codes.TOPIC_NOT_EXIST
        await client.close()
    serve(test, settings)


def test_at_connections_max_a_new_connection_is_closed() -> None:
    settings = dataclasses.replace(SETTINGS, connections_max=2)

    async def test(server: NamesrvServer, address: str) -> None:
        clients = [await RemotingClient.connect(address) for _ in range(2)]
        for client in clients:  # each between frames: none can be closed to make room
            assert (await client.request(codes.GET_BROKER_CLUSTER_INFO)).code == 0
        host, _, port = address.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        assert await asyncio.wait_for(reader.read(1), 5) == b""  # closed at accept
        writer.close()
        assert server.connections_open == 2
        for client in clients:
            await client.close()
    serve(test, settings)
