"""A broker group that joins a cluster empty takes the cluster's topics from the name server
(services/notifier/remoting/cluster_topics.py), so producers' routes include it at once;
with `remoting.cluster_topics_copy_enabled` off it takes none, as RocketMQ's broker."""

from __future__ import annotations

from pathlib import Path

from mqstore.services.notifier.remoting.cluster_topics import fastjson_loads
from tests.remoting.test_broker_registration import (
    REGISTRATION_SETTINGS,
    UPDATE_AND_CREATE_TOPIC,
    name_server,  # noqa: F401  (the fixture)
    wait_until,
)
from tests.remoting.up_process import mqstore_up
from tests.remoting_clients.raw_remoting import SUCCESS, request, route_of


def _group(namesrv: str, broker_name: str, **extra: str) -> dict[str, str]:
    return {**REGISTRATION_SETTINGS, "MQSTORE_REMOTING__NAMESRV_ADDRESSES": namesrv,
            "MQSTORE_REMOTING__CLUSTER_NAME": "joined", "MQSTORE_REMOTING__BROKER_NAME":
            broker_name, **extra}


def _queues(route: dict[str, object] | None) -> dict[str, tuple[int, int, int]]:
    """brokerName -> (read queues, write queues, perm) of a route."""
    datas = (route or {}).get("queueDatas", [])
    assert isinstance(datas, list)
    return {data["brokerName"]: (data["readQueueNums"], data["writeQueueNums"], data["perm"])
            for data in datas}


def test_a_new_group_takes_the_clusters_topics_and_an_opted_out_one_does_not(
        tmp_path: Path, name_server: str) -> None:  # noqa: F811
    for directory in ("a", "b", "c"):
        (tmp_path / directory).mkdir()
    with mqstore_up(tmp_path / "a", settings=_group(name_server, "ga")) as first:
        created = request(f"127.0.0.1:{first['remoting']}", UPDATE_AND_CREATE_TOPIC,
                          ext_fields={"topic": "Orders", "readQueueNums": "3",
                                      "writeQueueNums": "3", "perm": "6"})
        assert created.header["code"] == SUCCESS, created.header
        wait_until("Orders routed to ga", lambda: "ga" in _queues(
            route_of(name_server, "Orders")))
        with mqstore_up(tmp_path / "b", settings=_group(name_server, "gb")):
            assert wait_until("Orders routed to gb too", lambda: _queues(
                route_of(name_server, "Orders")) == {"ga": (3, 3, 6), "gb": (3, 3, 6)})
        off = {"MQSTORE_REMOTING__CLUSTER_TOPICS_COPY_ENABLED": "false"}
        with mqstore_up(tmp_path / "c", settings=_group(name_server, "gc", **off)):
            wait_until("gc registered", lambda: "gc" in _queues(
                route_of(name_server, "TBW102")))
            assert "gc" not in _queues(route_of(name_server, "Orders"))
    assert "joined cluster joined empty: created its 1 topics" in (
        tmp_path / "b" / "up.log").read_text()


def test_fastjson_bare_number_keys_are_read() -> None:
    body = rb'{"brokerAddrs":{0:"10.0.0.1:10911",1:"a:9"},"t":"x,1:y","u":"\"{2:z"}'
    assert fastjson_loads(body) == {"brokerAddrs": {"0": "10.0.0.1:10911", "1": "a:9"},
                                    "t": "x,1:y", "u": '"{2:z'}
