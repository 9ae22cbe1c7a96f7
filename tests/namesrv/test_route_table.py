"""RouteTable (services/namesrv/route_table.py): register, re-register, expiry, unregister,
routes across groups and clusters, and its bounds."""

from __future__ import annotations

import pytest

from mqstore.services.namesrv.route_table import (
    QueueData,
    Registration,
    RouteTable,
    TableFull,
)

RW = QueueData(read_queue_nums=4, write_queue_nums=4, perm=6)


def table(**bounds: int) -> RouteTable:
    return RouteTable(brokers_max=bounds.get("brokers_max", 10),
                      topics_per_broker_max=bounds.get("topics_per_broker_max", 100))


def master(name: str, address: str, topics: dict[str, QueueData] | None, *,
           cluster: str = "c1", counter: int = 1, connection_id: int = 1) -> Registration:
    return Registration(cluster=cluster, broker_address=address, broker_name=name,
                        broker_id=0, ha_server_address=address + "1", topics=topics,
                        data_version={"counter": counter, "timestamp": 7},
                        connection_id=connection_id)


def test_a_registered_master_routes_its_topics() -> None:
    routes = table()
    routes.register(master("a", "h:1", {"t": RW}), now_ms=0)
    assert routes.route("t") == {
        "brokerDatas": [{"brokerAddrs": {"0": "h:1"}, "brokerName": "a", "cluster": "c1",
                         "enableActingMaster": False}],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": "a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0,
                        "writeQueueNums": 4}]}
    assert routes.route("other") is None
    assert routes.topic_names() == ["t"]


def test_re_registration_with_a_new_version_changes_the_queues() -> None:
    routes = table()
    routes.register(master("a", "h:1", {"t": RW}), now_ms=0)
    eight = QueueData(read_queue_nums=8, write_queue_nums=8, perm=6)
    routes.register(master("a", "h:1", {"t": eight, "u": RW}, counter=2), now_ms=1)
    route = routes.route("t")
    assert route is not None
    assert route["queueDatas"] == [eight.to_json("a")]
    assert routes.topic_names() == ["t", "u"]


def test_re_registration_with_the_same_version_changes_nothing() -> None:
    routes = table()
    routes.register(master("a", "h:1", {"t": RW}), now_ms=0)
    routes.register(master("a", "h:1", {"t": RW, "u": RW}), now_ms=1)
    assert routes.topic_names() == ["t"]


def test_deleting_topics_on_registration_drops_the_unlisted() -> None:
    routes = RouteTable(brokers_max=10, topics_per_broker_max=100,
                        delete_topics_on_registration=True)
    routes.register(master("a", "h:1", {"t": RW, "u": RW}), now_ms=0)
    routes.register(master("a", "h:1", {"u": RW}, counter=2), now_ms=1)
    assert routes.topic_names() == ["u"]


def test_routes_across_two_groups_of_one_cluster_and_two_clusters() -> None:
    routes = table()
    routes.register(master("a", "h:1", {"t": RW}), now_ms=0)
    routes.register(master("b", "h:2", {"t": RW, "only-b": RW}), now_ms=0)
    routes.register(master("x", "h:3", {"t": RW}, cluster="c2"), now_ms=0)
    route = routes.route("t")
    assert route is not None
    assert [data["brokerName"] for data in route["queueDatas"]] == ["a", "b", "x"]
    assert [data["cluster"] for data in route["brokerDatas"]] == ["c1", "c1", "c2"]
    info = routes.cluster_info()
    assert info["clusterAddrTable"] == {"c1": ["a", "b"], "c2": ["x"]}
    assert routes.topic_names(cluster="c2") == ["t"]
    assert routes.topic_names(cluster="c1") == ["only-b", "t"]


def test_a_follower_joins_its_group_and_learns_its_master() -> None:
    routes = table()
    routes.register(master("a", "h:1", {"t": RW}), now_ms=0)
    follower = Registration(cluster="c1", broker_address="h:9", broker_name="a", broker_id=1,
                            topics={"ignored": RW})
    registered = routes.register(follower, now_ms=0)
    assert (registered.master_address, registered.ha_server_address) == ("h:1", "h:11")
    assert routes.topic_names() == ["t"]
    route = routes.route("t")
    assert route is not None
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "h:1", "1": "h:9"}
    routes.drop("c1", "h:1")  # the master leaves: the group keeps its follower and queues
    route = routes.route("t")
    assert route is not None
    assert route["brokerDatas"][0]["brokerAddrs"] == {"1": "h:9"}


def test_unregister_drops_the_group_its_queues_and_its_cluster() -> None:
    routes = table()
    routes.register(master("a", "h:1", {"t": RW}), now_ms=0)
    routes.register(master("b", "h:2", {"t": RW}), now_ms=0)
    assert routes.drop("c1", "h:1")
    route = routes.route("t")
    assert route is not None
    assert [data["brokerName"] for data in route["queueDatas"]] == ["b"]
    assert routes.drop("c1", "h:2")
    assert routes.route("t") is None
    assert routes.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}
    assert not routes.drop("c1", "h:2")


def test_a_silent_broker_expires_and_one_heard_from_does_not() -> None:
    routes = table()
    routes.register(master("a", "h:1", {"t": RW}), now_ms=0)
    routes.register(master("b", "h:2", {"t": RW}), now_ms=0)
    assert routes.heard("c1", "h:2", now_ms=100_000) is not None
    assert routes.expire(now_ms=119_999, expiry_ms=120_000) == []
    assert routes.expire(now_ms=120_000, expiry_ms=120_000) == ["h:1"]
    route = routes.route("t")
    assert route is not None
    assert [data["brokerName"] for data in route["queueDatas"]] == ["b"]
    assert routes.heard("c1", "h:1", now_ms=120_001) is None


def test_a_closed_connection_drops_the_brokers_registered_on_it() -> None:
    routes = table()
    routes.register(master("a", "h:1", {"t": RW}, connection_id=5), now_ms=0)
    routes.register(master("b", "h:2", {"u": RW}, connection_id=6), now_ms=0)
    assert routes.connection_closed(5) == ["h:1"]
    assert routes.topic_names() == ["u"]


def test_bounds_refuse_and_change_nothing() -> None:
    routes = table(brokers_max=1, topics_per_broker_max=2)
    routes.register(master("a", "h:1", {"t": RW}), now_ms=0)
    with pytest.raises(TableFull, match="brokers_max=1"):
        routes.register(master("b", "h:2", {"t": RW}), now_ms=0)
    routes.register(master("a", "h:1", {"t": RW}), now_ms=1)  # one registered comes back
    with pytest.raises(TableFull, match="topics_per_broker_max=2"):
        routes.register(master("a", "h:1", {"u": RW, "v": RW}, counter=2), now_ms=2)
    assert routes.topic_names() == ["t"]
    assert list(routes.clusters) == ["c1"]


def test_an_address_registered_under_a_new_name_leaves_its_old_group() -> None:
    routes = table(brokers_max=1)
    routes.register(master("a", "h:1", {"t": RW}), now_ms=0)
    routes.register(master("b", "h:1", {"u": RW}), now_ms=1)
    assert list(routes.groups) == ["b"]
    assert routes.topic_names() == ["u"]


def test_write_permission_and_topic_deletion() -> None:
    routes = table()
    routes.register(master("a", "h:1", {"t": RW, "u": RW}), now_ms=0)
    routes.register(master("x", "h:3", {"t": RW}, cluster="c2"), now_ms=0)
    assert routes.set_write_permission("a", writable=False) == 2
    route = routes.route("t")
    assert route is not None
    assert route["queueDatas"][0]["perm"] == 4
    assert routes.set_write_permission("a", writable=True) == 2
    routes.delete_topic("t", cluster="c2")
    route = routes.route("t")
    assert route is not None
    assert [data["brokerName"] for data in route["queueDatas"]] == ["a"]
    routes.delete_topic("t")
    assert routes.route("t") is None
