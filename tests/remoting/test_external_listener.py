"""The remoting front's external listener (`remoting.external_enabled`): a client outside
the cluster network comes in on `external_port`, and the routes and cluster info it is
answered there name `external_advertised_address`, while those answered on the internal
port still name the internal address.  RocketMQ's Go client given only the external port
as its name server produces and consumes through it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.storage import ConfigError
from tests.processes import MQSTORE
from tests.remoting.test_broker_registration import REGISTRATION_SETTINGS, wait_until
from tests.remoting.up_process import mqstore_up
from tests.remoting_clients.go_client import GoClient
from tests.remoting_clients.raw_remoting import GET_BROKER_CLUSTER_INFO, request, route_of
from tests.remoting_clients.rocketmq_peer import free_port

MESSAGES = 50


def test_each_listener_routes_clients_to_its_own_address(tmp_path: Path) -> None:
    external_port = free_port()
    external = f"127.0.0.1:{external_port}"
    settings = {"MQSTORE_REMOTING__EXTERNAL_ENABLED": "true",
                "MQSTORE_REMOTING__EXTERNAL_PORT": str(external_port),
                "MQSTORE_REMOTING__EXTERNAL_ADVERTISED_ADDRESS": external}
    with mqstore_up(tmp_path, settings=settings) as ports:
        internal = f"127.0.0.1:{ports['remoting']}"
        for listener, expected in ((internal, internal), (external, external)):
            route = route_of(listener, "TBW102")
            assert route is not None
            assert route["brokerDatas"][0]["brokerAddrs"] == {"0": expected}, listener
            info = request(listener, GET_BROKER_CLUSTER_INFO).body.decode()
            assert f'"{expected}"' in info, info
        result = GoClient.build().run(namesrv=external, topic="FromOutside", count=MESSAGES)
    assert result["ok"], result
    assert (result["sent"], result["received"], result["duplicates"]) == (
        MESSAGES, MESSAGES, 0), result


def test_a_groups_pods_each_advertise_their_own_node_port() -> None:
    settings = RemotingSettings(external_enabled=True, external_advertised_address="n:30901",
                                external_advertised_port_plus_broker_id=True, broker_id=2)
    assert settings.external_address == "n:30903"
    assert RemotingSettings(external_enabled=True, external_advertised_address="n:30901",
                            broker_id=2).external_address == "n:30901"


def test_a_groups_pods_each_advertise_their_own_load_balancer() -> None:
    addresses = "10.1.0.7:9877; lb-1.example:9877;10.1.0.9:9877"
    assert [RemotingSettings(external_enabled=True, external_advertised_address="10.1.0.7:9877",
                             external_advertised_addresses=addresses,
                             broker_id=broker_id).external_address
            for broker_id in range(3)] == ["10.1.0.7:9877", "lb-1.example:9877",
                                           "10.1.0.9:9877"]


@pytest.mark.parametrize(("fields", "refusal"), [
    ({"external_enabled": True}, "external_advertised_address=''"),
    ({"external_enabled": True, "external_advertised_address": "node:0"}, "port in 1..65535"),
    ({"external_enabled": True, "external_advertised_address": "node:30001",
      "port": 9876, "external_port": 9876}, "must differ"),
    ({"external_port": 70000}, "external_port=70000"),
    ({"external_enabled": True, "external_advertised_address": "n:65535", "broker_id": 1,
      "external_advertised_port_plus_broker_id": True}, "passes 65535"),
    ({"external_enabled": True, "external_advertised_address": "n:9877", "broker_id": 2,
      "external_advertised_addresses": "a:9877;b:9877"}, "none for broker_id=2"),
    ({"external_enabled": True, "external_advertised_address": "n:9877",
      "external_advertised_addresses": "a:9877;b"}, "'b' must be host:port"),
])
def test_a_bad_external_listener_setting_is_refused(fields: dict[str, object],
                                                    refusal: str) -> None:
    with pytest.raises(ConfigError, match=refusal):
        RemotingSettings(**fields)  # type: ignore[arg-type]


def test_the_name_servers_external_listener_routes_to_brokers_external_addresses(
        tmp_path: Path) -> None:
    """`mqstore namesrv --external-port`: a broker registers its external address
    (`externalBrokerAddr`), clients on the name server's external port are routed to it,
    those on its own port to the broker's own address; the Go client goes in from outside."""
    port, external_namesrv_port, external_port = free_port(), free_port(), free_port()
    process = subprocess.Popen(
        [*MQSTORE, "namesrv", "--port", str(port), "--external-port",
         str(external_namesrv_port), "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        assert "listening on" in process.stdout.readline()
        assert f"external listener on 127.0.0.1:{external_namesrv_port}" in \
            process.stdout.readline()
        namesrv, outside = f"127.0.0.1:{port}", f"127.0.0.1:{external_namesrv_port}"
        external = f"127.0.0.1:{external_port}"
        settings = {**REGISTRATION_SETTINGS, "MQSTORE_REMOTING__NAMESRV_ADDRESSES": namesrv,
                    "MQSTORE_REMOTING__EXTERNAL_ENABLED": "true",
                    "MQSTORE_REMOTING__EXTERNAL_PORT": str(external_port),
                    "MQSTORE_REMOTING__EXTERNAL_ADVERTISED_ADDRESS": external}
        with mqstore_up(tmp_path, settings=settings) as ports:
            inside = f"127.0.0.1:{ports['remoting']}"
            route = wait_until("TBW102 routed", lambda: route_of(namesrv, "TBW102"))
            assert route["brokerDatas"][0]["brokerAddrs"] == {"0": inside}
            route = route_of(outside, "TBW102")
            assert route is not None
            assert route["brokerDatas"][0]["brokerAddrs"] == {"0": external}
            info = request(outside, GET_BROKER_CLUSTER_INFO).body.decode()
            assert f'"{external}"' in info and f'"{inside}"' not in info, info
            result = GoClient.build().run(namesrv=outside, topic="ThroughNamesrv",
                                          count=MESSAGES)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert result["ok"], result
    assert (result["sent"], result["received"], result["duplicates"]) == (
        MESSAGES, MESSAGES, 0), result
