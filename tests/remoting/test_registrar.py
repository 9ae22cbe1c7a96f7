"""`BrokerRegistrar` (services/notifier/remoting/registrar.py) in-process, against
`mqstore namesrv`'s server (services/namesrv/) and a name server that never answers, and the
requests it builds (services/notifier/remoting/registration_requests.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from mqstore.services.common.links.framing import FrameLimits, FrameWatchdog
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.namesrv import registration
from mqstore.services.namesrv.run import build
from mqstore.services.namesrv.server import NamesrvServer
from mqstore.services.namesrv.settings import NamesrvSettings
from mqstore.services.notifier.remoting import registration_requests as requests
from mqstore.services.notifier.remoting.codes import GET_BROKER_CLUSTER_INFO, SUCCESS
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.namesrv_link import NamesrvLink, split_address
from mqstore.services.notifier.remoting.registrar import BrokerRegistrar
from mqstore.services.notifier.remoting.topics import TopicConfig
from mqstore.storage import ConfigError
from tests.remoting.fronts import front_over

FAST = {"register_interval_ms": 500, "register_timeout_ms": 300,
        "register_topics_check_interval_ms": 100}
WAIT_S = 10.0


async def until(what: str, check: Callable[[], object]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"not within {WAIT_S} s: {what}"
        await asyncio.sleep(0.02)


async def started_namesrv(*, delete_topics_on_registration: bool = False
                          ) -> tuple[NamesrvServer, str]:
    server = build(NamesrvSettings(
        port=0, delete_topics_on_registration=delete_topics_on_registration))
    port = await server.start()
    return server, f"127.0.0.1:{port}"


async def silent_server() -> AsyncIterator[str]:
    """A name server that accepts connections and never answers."""
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


def test_a_silent_name_server_holds_only_its_own_task(tmp_path: Path) -> None:
    asyncio.run(_a_silent_name_server_holds_only_its_own_task(tmp_path))


async def _a_silent_name_server_holds_only_its_own_task(tmp_path: Path) -> None:
    namesrv, good = await started_namesrv()
    silent_servers = silent_server()
    silent = await anext(silent_servers)
    settings = RemotingSettings(port=0, namesrv_addresses=f"{good};{silent}", **FAST)
    try:
        with front_over(tmp_path, settings=settings) as front:
            registrar = BrokerRegistrar(front)
            registrar.start()
            await until("registered with the good one twice, the silent one timed out",
                        lambda: registrar.counts[(good, "success")] >= 2
                        and registrar.counts[(silent, "timeout")] >= 1)
            route = namesrv.namesrv.routes.route("TBW102")
            assert route is not None
            assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:9876"}
            closing_s = time.monotonic()
            await registrar.close()
            assert time.monotonic() - closing_s < 1.0, "unregistering waits its timeout at most"
            assert namesrv.namesrv.routes.route("TBW102") is None, "unregistered"
    finally:
        await silent_servers.aclose()
        await namesrv.close()


def test_topics_created_and_deleted_are_registered_with_new_data_versions(tmp_path: Path) -> None:
    asyncio.run(_topics_created_and_deleted_are_registered_with_new_data_versions(tmp_path))


async def _topics_created_and_deleted_are_registered_with_new_data_versions(
        tmp_path: Path) -> None:
    """With `delete_topics_on_registration`, a name server drops what a master no longer
    lists: the deletion reaches its routes through the next registration alone."""
    namesrv, address = await started_namesrv(delete_topics_on_registration=True)
    settings = RemotingSettings(port=0, namesrv_addresses=address, **FAST)
    try:
        with front_over(tmp_path, settings=settings) as front:
            registrar = BrokerRegistrar(front)
            registrar.start()
            await until("registered", lambda: registrar.counts[(address, "success")] >= 1)
            assert registrar.version.counter == 0
            front.topics.create(TopicConfig("fresh", 2, 2, 6))
            await until("the new topic routed",
                        lambda: namesrv.namesrv.routes.route("fresh") is not None)
            assert registrar.version.counter == 1
            assert front.topics.delete("fresh")
            await until("the deleted topic gone",
                        lambda: namesrv.namesrv.routes.route("fresh") is None)
            assert registrar.version.counter == 2
            await registrar.close()
    finally:
        await namesrv.close()


def test_a_dns_name_is_resolved_at_each_round(tmp_path: Path) -> None:
    asyncio.run(_a_dns_name_is_resolved_at_each_round(tmp_path))


async def _a_dns_name_is_resolved_at_each_round(tmp_path: Path) -> None:
    namesrv, address = await started_namesrv()
    port = address.rpartition(":")[2]
    settings = RemotingSettings(port=0, namesrv_addresses=f"localhost:{port}", **FAST)
    try:
        with front_over(tmp_path, settings=settings) as front:
            registrar = BrokerRegistrar(front)
            registrar.start()
            await until("registered through the name",
                        lambda: registrar.counts[(address, "success")] >= 1)
            await registrar.close()
    finally:
        await namesrv.close()


def test_the_body_is_what_a_name_server_decodes() -> None:
    topics = {"a": TopicConfig("a", 4, 4, 6), "b": TopicConfig("b", 1, 2, 2)}
    version = requests.DataVersion(counter=7, timestamp_ms=1_700_000_000_000)
    body = requests.register_body(topics, version)
    decoded = registration.decode(body, compressed=False, inflated_bytes_max=1 << 20)
    assert {name: (data.read_queue_nums, data.write_queue_nums, data.perm)
            for name, data in decoded.topics.items()} == {"a": (4, 4, 6), "b": (1, 2, 2)}
    assert decoded.data_version == {"counter": 7, "timestamp": 1_700_000_000_000,
                                    "stateVersion": 0}
    request = requests.register_request(RemotingSettings(), broker_address="h:1", body=body,
                                        opaque=5)
    registration.check_crc32(body, request.ext_fields["bodyCrc32"])
    assert 0 <= int(request.ext_fields["bodyCrc32"]) <= 0x7FFFFFFF
    assert request.ext_fields["brokerId"] == "0"
    assert request.ext_fields["brokerAddr"] == "h:1"


@pytest.mark.parametrize("values", [
    {"namesrv_addresses": "no-port"},
    {"namesrv_addresses": "a:9876;b:0"},
    {"register_timeout_ms": 40_000},
    {"register_interval_ms": 0},
    {"broker_id": -1},
    {"name_servers_max": 0},
])
def test_registration_settings_are_checked(values: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        RemotingSettings(**values)  # type: ignore[arg-type]


def test_addresses_split_as_rocketmq_namesrv_addr() -> None:
    settings = RemotingSettings(namesrv_addresses=" a:9876; b.ns.svc:9876 ;")
    assert settings.namesrv_address_list == ("a:9876", "b.ns.svc:9876")
    assert RemotingSettings().namesrv_address_list == ()


def test_a_restarted_name_server_is_called_again_at_once() -> None:
    asyncio.run(_a_restarted_name_server_is_called_again_at_once())


async def _a_restarted_name_server_is_called_again_at_once() -> None:
    """The kept connection to a name server that restarted is closed; the next call finds
    out by using it, and is sent again on a new connection instead of failing its round."""
    first, address = await started_namesrv()
    host, port = split_address(address)
    link = NamesrvLink(host, port, watchdog=FrameWatchdog(FrameLimits(
        frame_size_bytes_max=1 << 20, frame_read_timeout_ms=1000,
        write_buffer_bytes_max=1 << 20, write_drain_timeout_ms=1000)))
    try:
        assert (await link.call(Command(GET_BROKER_CLUSTER_INFO, link.next_opaque()))).code \
            == SUCCESS
        await first.close()
        second = build(NamesrvSettings(port=port))
        await second.start()
        try:
            answer = await link.call(Command(GET_BROKER_CLUSTER_INFO, link.next_opaque()))
            assert answer.code == SUCCESS
        finally:
            await second.close()
    finally:
        link.close()
